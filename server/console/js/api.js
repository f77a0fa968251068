// The client of backfilld's HTTP/JSON API (same origin): protobuf's
// canonical JSON of backfill.v1, errors as google.rpc.Status. The bearer
// token travels only in the Authorization header of each fetch (never a
// cookie or a URL); see session.js for where it is kept.

import {getToken} from './session.js';

// An API refusal: the HTTP status, the canonical code, the message (written
// for people), ErrorInfo's reason and metadata, and BadRequest's field
// violations [{field, description}].
export class ApiError extends Error {
  constructor(status, body) {
    const message = (body && body.message) ||
        (status ? `HTTP ${status}` : 'The daemon could not be reached');
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = body && typeof body.code === 'number' ? body.code : 0;
    this.reason = '';
    this.metadata = {};
    this.fieldViolations = [];
    for (const detail of (body && body.details) || []) {
      const type = detail['@type'] || '';
      if (type.endsWith('google.rpc.ErrorInfo')) {
        this.reason = detail.reason || '';
        this.metadata = detail.metadata || {};
      } else if (type.endsWith('google.rpc.BadRequest')) {
        this.fieldViolations.push(...(detail.fieldViolations || []));
      }
    }
  }
}

// Called with the error of any call answered 401 (set by main.js: back to
// the sign-in form).
let unauthenticatedHandler = null;
export function onUnauthenticated(handler) {
  unauthenticatedHandler = handler;
}

function headers(extra = {}) {
  const result = {Accept: 'application/json', ...extra};
  const token = getToken();
  if (token) result.Authorization = `Bearer ${token}`;
  return result;
}

// Query parameters from a request object: lowerCamelCase names, repeated
// fields as repeated parameters; empty and false values left out (the
// defaults).
export function queryString(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value === undefined || value === null || value === '' ||
        value === false) {
      continue;
    }
    if (Array.isArray(value)) {
      for (const item of value) search.append(key, String(item));
    } else {
      search.append(key, String(value));
    }
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

async function errorFrom(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (e) {
    body = null;
  }
  const error = new ApiError(response.status, body);
  if (response.status === 401 && unauthenticatedHandler) {
    unauthenticatedHandler(error);
  }
  return error;
}

// One call: method, path (e.g. "/v1/backfills/bf-3"), optional JSON body.
export async function call(method, path, {body, query, signal} = {}) {
  let response;
  try {
    response = await fetch(path + queryString(query), {
      method,
      headers: headers(body === undefined ? {} :
                                            {'Content-Type': 'application/json'}),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, {message: `The daemon could not be reached: ${e.message}`});
  }
  if (!response.ok) throw await errorFrom(response);
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

const seg = encodeURIComponent;

export const api = {
  session: (o) => call('GET', '/ui/session', o),
  listDatasets: (o) => call('GET', '/v1/datasets', o),
  getDataset: (name, o) => call('GET', `/v1/datasets/${seg(name)}`, o),
  listDatasetPartitions: (dataset, query, o) => call(
      'GET', `/v1/datasets/${seg(dataset)}/partitions`, {...o, query}),
  explainPartition: (dataset, partition, o) => call(
      'GET', `/v1/datasets/${seg(dataset)}/partitions/${seg(partition)}:explain`, o),
  plan: (request, o) => call('POST', '/v1/backfills:plan', {...o, body: {request}}),
  submit: (body, o) => call('POST', '/v1/backfills', {...o, body}),
  listBackfills: (query, o) => call('GET', '/v1/backfills', {...o, query}),
  getBackfill: (id, view, o) => call(
      'GET', `/v1/backfills/${seg(id)}`, {...o, query: {view}}),
  listPartitions: (id, query, o) => call(
      'GET', `/v1/backfills/${seg(id)}/partitions`, {...o, query}),
  diff: (id, query, o) => call('GET', `/v1/backfills/${seg(id)}:diff`, {...o, query}),
  // verb: cancel, pause, resume, retry, approve, rollback, confirm.
  jobAction: (id, verb, body, o) => call(
      'POST', `/v1/backfills/${seg(id)}:${verb}`, {...o, body: {id, ...body}}),
  listAuditEvents: (query, o) => call('GET', '/v1/auditEvents', {...o, query}),
  listReplayPolicies: (o) => call('GET', '/v1/replayPolicies', o),
  // verb: evaluate, pause, resume.
  policyAction: (dataset, verb, body, o) => call(
      'POST', `/v1/replayPolicies/${seg(dataset)}:${verb}`,
      {...o, body: {dataset, ...body}}),
  listNodes: (o) => call('GET', '/v1/nodes', o),
};

// Every page of a paged list: fetchPage(pageToken) -> response; onPage is
// called with each response as it arrives. Stops at an empty
// nextPageToken, or after maxPages.
export async function allPages(fetchPage, onPage, maxPages = 1000) {
  let token = '';
  for (let i = 0; i < maxPages; i++) {
    const page = await fetchPage(token);
    await onPage(page);
    token = page.nextPageToken || '';
    if (!token) return;
  }
}

// WatchBackfill as server-sent events read with fetch (the browser's own
// server-sent events client cannot send the Authorization header), parsed
// line by line here. Calls onUpdate(backfill) for every
// `data:` event; resolves when the stream ends (the job is terminal);
// rejects with an ApiError for an `event: error` or a refused request.
export async function watchBackfill(id, {view, signal, onUpdate}) {
  let response;
  try {
    response = await fetch(
        `/v1/backfills/${seg(id)}:watch${queryString({view})}`, {
          headers: headers({Accept: 'text/event-stream'}),
          signal,
          credentials: 'omit',
          cache: 'no-store',
        });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, {message: `The watch stream failed: ${e.message}`});
  }
  if (!response.ok) throw await errorFrom(response);
  if (!response.body) throw new ApiError(0, {message: 'No stream body'});
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data = [];
  const dispatch = () => {
    if (data.length === 0) {
      event = '';
      return;
    }
    const text = data.join('\n');
    const name = event || 'message';
    event = '';
    data = [];
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw new ApiError(0, {message: `A watch update was not JSON: ${e.message}`});
    }
    if (name === 'error') throw new ApiError(0, parsed);
    if (name === 'message') onUpdate(parsed);
  };
  try {
    await readLines();
  } catch (e) {
    reader.cancel().catch(() => {});
    throw e;
  }
  async function readLines() {
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let newline;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, newline);
      const width = buffer.startsWith('\r\n', newline) ? 2 : 1;
      buffer = buffer.slice(newline + width);
      if (line === '') {
        dispatch();
      } else if (line.startsWith(':')) {
        // A comment (keep-alive).
      } else {
        const colon = line.indexOf(':');
        const fieldName = colon < 0 ? line : line.slice(0, colon);
        let fieldValue = colon < 0 ? '' : line.slice(colon + 1);
        if (fieldValue.startsWith(' ')) fieldValue = fieldValue.slice(1);
        if (fieldName === 'data') data.push(fieldValue);
        else if (fieldName === 'event') event = fieldValue;
      }
    }
  }
  }
  buffer += decoder.decode();
  if (buffer) {
    // A last line without its blank line: dispatch what it holds.
    if (buffer.startsWith('data:')) data.push(buffer.slice(5).replace(/^ /, ''));
  }
  dispatch();
}
