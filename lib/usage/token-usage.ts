/**
 * The tokens of one answer, as its upstream counted them; 0 for what it did not report. The one
 * usage type: each format's usage reader gives it, metering, cost, tracing and the neutral
 * representation (`Usage`) read it.
 */
export interface TokenUsage {
  /** Every input token, those read from or written to the prompt cache included. */
  inputTokens: number;
  /** Every output token, reasoning included. */
  outputTokens: number;
  /** Of `inputTokens`, those read from the prompt cache, where the upstream reports them. */
  cacheReadTokens?: number;
  /** Of `inputTokens`, those written to the prompt cache, where the upstream reports them. */
  cacheWriteTokens?: number;
  /** Of `outputTokens`, those spent reasoning, where the upstream reports them. */
  reasoningTokens?: number;
}
