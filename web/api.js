// The gateway's public HTTP API, as curl uses it. The read or write token
// lives in sessionStorage and goes in a header, never in a URL; a 401
// asks for it once and retries.

import { $ } from './format.js';

const TOKEN_KEY = 'dagnats-leases-token';

export function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: 'Bearer ' + token } : {};
}

let tokenPrompt = null;
export function askToken(why) {
  if (!tokenPrompt) {
    tokenPrompt = new Promise((resolve) => {
      $('token-why').textContent = why;
      $('token-dialog').showModal();
      $('token-form').onsubmit = (e) => {
        e.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, $('token').value);
        $('token').value = '';
        $('token-dialog').close();
        tokenPrompt = null;
        resolve();
      };
    });
  }
  return tokenPrompt;
}

// `{status, data}`; `signal` aborts it (a window the user has left).
export async function api(method, path, body, signal) {
  for (;;) {
    const headers = authHeaders();
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(path, {
      method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status === 401) {
      await askToken(method === 'GET' ? 'This gateway needs a read token.' : 'This action needs the write token.');
      continue;
    }
    const data = await res.json().catch(() => ({}));
    return { status: res.status, data };
  }
}
