// Response shapes of the Go server: compact JSON on success, `{"error","status"}` + newline as text/plain on
// failure (Go's http.Error), empty 204s.
import type { ApiError } from '../errors.ts';

export interface ApiResponse {
  status: number;
  body?: string;
  headers?: Record<string, string>;
}

export function json(status: number, value: unknown): ApiResponse {
  return { status, body: JSON.stringify(value), headers: { 'Content-Type': 'application/json' } };
}

export function noContent(): ApiResponse {
  return { status: 204 };
}

export function plainText(status: number, text: string): ApiResponse {
  return {
    status,
    body: `${text}\n`,
    headers: { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' },
  };
}

export function errorResponse(error: ApiError): ApiResponse {
  const body = { error: error.message, status: error.status, ...error.extra };
  return plainText(error.status, JSON.stringify(body));
}
