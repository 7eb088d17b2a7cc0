/** api.md section 8's limits, written out here so that a changed default fails the tests that use them. */
export const SPEC_LIMITS = {
  maxFileBytes: 26_214_400,
  maxFiles: 1000,
  maxStoredBytes: 100_000_000,
  createsPerMinute: 10,
  createsPerDay: 1000,
  bytesPerDay: 1_073_741_824,
} as const;
