// The registry's API on the page's own origin. Every failure becomes an ApiError with the
// protocol code the registry sent (or TRANSPORT_ERROR when no answer came), so the page can
// show the code and its hint.

export class ApiError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

// call sends one request. token, when given, is the bearer; body, when given, is sent as JSON.
export async function call(method, path, { token, body } = {}) {
  const headers = {};
  if (token) headers.Authorization = 'Bearer ' + token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
      redirect: 'error',
    });
  } catch (e) {
    throw new ApiError('TRANSPORT_ERROR', `${method} ${path}: no answer from the registry (${e.message})`, 0);
  }
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (!res.ok) {
    if (data && typeof data.code === 'string') {
      throw new ApiError(data.code, String(data.error || ''), res.status);
    }
    throw new ApiError('', `HTTP ${res.status} ${res.statusText}`, res.status);
  }
  if (data === null) throw new ApiError('TRANSPORT_ERROR', `${method} ${path}: the answer is not JSON`, res.status);
  return data;
}
