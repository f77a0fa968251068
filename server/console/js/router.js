// Hash routes: #/backfills, #/backfills/{id}, #/backfills/{id}/partitions/
// {dataset}/{partition}, #/datasets, #/datasets/{name}, #/datasets/{name}/
// partitions/{partition}, #/plan, #/nodes; a query after '?' carries a
// page's filters (#/backfills?states=...&dataset=...).
//
// A page is {mount(container, params, query) -> instance}; an instance has
// unmount() and may have update(params, query) -> true when it shows the
// new route itself (the job page opening a partition's panel keeps its
// grid).

const routes = [];

export function route(pattern, name, page) {
  const keys = [];
  const source = pattern.split('/').map((part) => {
    if (part.startsWith(':')) {
      keys.push(part.slice(1));
      return '([^/]*)';
    }
    return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }).join('/');
  routes.push({regex: new RegExp(`^${source}$`), keys, name, page});
}

export function parseHash(hash) {
  let text = hash.startsWith('#') ? hash.slice(1) : hash;
  if (!text) text = '/backfills';
  const q = text.indexOf('?');
  const path = q < 0 ? text : text.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : text.slice(q + 1));
  for (const r of routes) {
    const match = r.regex.exec(path);
    if (!match) continue;
    const params = {};
    r.keys.forEach((key, i) => {
      try {
        params[key] = decodeURIComponent(match[i + 1]);
      } catch (e) {
        params[key] = match[i + 1];
      }
    });
    return {route: r, params, query, path};
  }
  return null;
}

// A route's hash from its parts, each segment encoded.
export function hashOf(...segments) {
  return `#/${segments.map((s) => encodeURIComponent(s)).join('/')}`;
}

export function navigate(hash) {
  if (location.hash === hash) {
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    location.hash = hash;
  }
}

export class Router {
  constructor(container, {onNotFound, onRoute}) {
    this.container = container;
    this.onNotFound = onNotFound;
    this.onRoute = onRoute;
    this.current = null;
    this.listener = () => this.render();
  }

  start() {
    window.addEventListener('hashchange', this.listener);
    this.render();
  }

  stop() {
    window.removeEventListener('hashchange', this.listener);
    this.unmount();
  }

  unmount() {
    if (this.current && this.current.instance) {
      this.current.instance.unmount();
    }
    this.current = null;
  }

  render() {
    const parsed = parseHash(location.hash);
    if (this.onRoute) this.onRoute(parsed);
    if (!parsed) {
      this.unmount();
      this.onNotFound(this.container);
      return;
    }
    const {route: r, params, query} = parsed;
    const cur = this.current;
    if (cur && cur.route.page === r.page && cur.instance.update &&
        cur.instance.update(params, query)) {
      cur.params = params;
      return;
    }
    this.unmount();
    const instance = r.page.mount(this.container, params, query);
    this.current = {route: r, params, instance};
    // Focus the new page's heading, so that keyboard and screen reader
    // users start at the top of what changed.
    const heading = this.container.querySelector('h1');
    if (heading) {
      heading.setAttribute('tabindex', '-1');
      heading.focus({preventScroll: false});
    }
  }
}
