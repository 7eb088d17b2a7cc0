/** The per-upload and per-account limits of api.md section 8. */
export interface FileLimits {
  /** The largest PDF, in bytes. */
  maxFileBytes: number;
  /** Live files an account may keep. */
  maxFiles: number;
  /** Bytes of live files an account may keep. */
  maxStoredBytes: number;
}

/**
 * The file limits of api.md section 8: 25 MiB per file, 1,000 files and 100,000,000 bytes kept per account.
 * @example filesRouter({ files, blobs, limits: { ...DEFAULT_FILE_LIMITS, maxFiles: 5000 } })
 */
export const DEFAULT_FILE_LIMITS: Readonly<FileLimits> = {
  maxFileBytes: 26_214_400,
  maxFiles: 1000,
  maxStoredBytes: 100_000_000,
};
