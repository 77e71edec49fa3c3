// The API client: the token the person pasted lives in this tab's sessionStorage and goes out
// only as an Authorization header, never in a URL.

const KEY = "kusion.token";

export const session = {
  get token() {
    return sessionStorage.getItem(KEY);
  },
  set(token) {
    sessionStorage.setItem(KEY, token);
  },
  clear() {
    sessionStorage.removeItem(KEY);
  },
};

/** An error answer: the RFC 9457 problem document the server sent. */
export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

let unauthorized = () => {};
/** Called when the server refuses the token (it expired or was revoked). */
export function onUnauthorized(f) {
  unauthorized = f;
}

function headers(extra) {
  const out = { Accept: "application/json", ...extra };
  const token = session.token;
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

async function problemOf(response) {
  const text = await response.text().catch(() => "");
  try {
    return JSON.parse(text);
  } catch {
    return { detail: text || response.statusText };
  }
}

/** `method path` with the token; the JSON answer, or an ApiError. */
export async function api(path, { method = "GET", body, signal } = {}) {
  const init = {
    method,
    signal,
    cache: "no-store",
    headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }),
  };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (!response.ok) {
    const problem = await problemOf(response);
    if (response.status === 401) unauthorized();
    throw new ApiError(response.status, problem);
  }
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

export const seg = encodeURIComponent;

export function stackPath(project, stack) {
  return `/api/v1/projects/${seg(project)}/stacks/${seg(stack)}`;
}

function parseFrame(frame) {
  let event = "message";
  let id = null;
  const data = [];
  for (const line of frame.split(/\r?\n/)) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (data.length === 0) return null;
  let parsed;
  try {
    parsed = JSON.parse(data.join("\n"));
  } catch {
    parsed = data.join("\n");
  }
  return { event, id, data: parsed };
}

/**
 * An operation's Server-Sent Events, read with fetch so the token goes in the Authorization
 * header (EventSource cannot send one). Resumes after a dropped connection with
 * Last-Event-ID; resolves when the server ends the stream (the operation reached a final
 * status) or `signal` aborts.
 */
export async function streamEvents(id, onEvent, signal) {
  let last = 0;
  for (let attempt = 0; attempt < 20; attempt++) {
    if (signal && signal.aborted) return;
    try {
      const extra = { Accept: "text/event-stream" };
      if (last) extra["Last-Event-ID"] = String(last);
      const response = await fetch(`/api/v1/operations/${seg(id)}/events`, {
        headers: headers(extra),
        signal,
        cache: "no-store",
      });
      if (!response.ok) {
        const problem = await problemOf(response);
        if (response.status === 401) unauthorized();
        throw new ApiError(response.status, problem);
      }
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += value;
        let match;
        while ((match = /\r?\n\r?\n/.exec(buffer))) {
          const frame = buffer.slice(0, match.index);
          buffer = buffer.slice(match.index + match[0].length);
          const event = parseFrame(frame);
          if (!event) continue;
          if (event.id) last = Number(event.id) || last;
          onEvent(event);
        }
      }
    } catch (e) {
      if (e instanceof ApiError || (signal && signal.aborted)) throw e;
      // A dropped connection: resume where it stopped.
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}
