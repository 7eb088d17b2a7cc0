/** A PDF upload that passed every check, on `ctx.state.upload`, for the middleware after `pdfUpload()`. */
export interface ValidatedUpload {
  /**
   * The temp file holding the bytes, finished; removed by `pdfUpload()` once the request is done,
   * unless a later middleware moved it away (`BlobStore.putFile`).
   */
  path: string;
  /** The sanitised file name: a base name ending in `.pdf`. */
  filename: string;
  /** Exact size of the PDF in bytes. */
  bytes: number;
  /** `expires_after[seconds]`, or null when no expiry was asked for. */
  expiresAfterSeconds: number | null;
}

declare module 'koa' {
  interface DefaultState {
    /** Set by `pdfUpload()`. */
    upload?: ValidatedUpload;
  }
}
