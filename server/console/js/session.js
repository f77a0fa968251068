// Who is signed in: the bearer token (kept in sessionStorage, so that it
// lasts as long as the tab and is never sent as a cookie) and what
// GET /ui/session said about it: {authentication, principal, roles,
// allowedMethods}. Actions are shown only when their RPC method is in
// allowedMethods.

const TOKEN_KEY = 'backfilld.console.token';

let info = null;

export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch (e) {
    return '';
  }
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  try {
    sessionStorage.removeItem(TOKEN_KEY);
  } catch (e) {
    // Storage unavailable: nothing was kept.
  }
  info = null;
}

export function setSessionInfo(value) {
  info = value || {};
}

export function sessionInfo() {
  return info || {};
}

// Whether the caller may call RPC `method` ("ApproveBackfill").
export function can(method) {
  const allowed = (info && info.allowedMethods) || [];
  return allowed.includes(method);
}
