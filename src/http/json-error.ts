// Every error the service answers itself is JSON: `{"error": "...", ...details}`.
export function jsonError(status: number, error: string, extra: Record<string, unknown> = {}): Response {
  return new Response(JSON.stringify({ error, ...extra }), { status, headers: { 'Content-Type': 'application/json' } });
}
