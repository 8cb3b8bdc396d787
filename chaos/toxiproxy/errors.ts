// An API failure with the Go server's status code and exact message; `extra` adds fields to the error body
// (populate reports the proxies it did create).
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export const proxyNotFound = () => new ApiError(404, 'proxy not found');
export const toxicNotFound = () => new ApiError(404, 'toxic not found');
