// The replicas (#/nodes): ListNodes, each replica with its address,
// version, heartbeat, whether it is live or draining, and the job leases
// it holds.

import {api} from '../api.js';
import {h, link, replace, table} from '../dom.js';
import {timeEl} from '../format.js';
import {hashOf} from '../router.js';
import {showPageError} from '../status.js';

export const nodesPage = {
  mount(container) {
    const abort = new AbortController();
    const body = h('div', null, h('p', {class: 'loading'}, 'Loading replicas…'));
    replace(container, h('h1', null, 'Replicas'), body);
    document.title = 'Replicas · backfilld';
    api.listNodes({signal: abort.signal}).then((r) => {
      replace(body, 
          h('p', null, r.group ? 'A group of replicas sharing one state store.' :
            'A daemon alone on its state.db.', ' Read at ', timeEl(r.readTime), '.'),
          table([
            {label: 'Replica', cell: (n) => [n.name, n.self ? ' (this one)' : '']},
            {label: 'Address', class: 'mono', cell: (n) => n.address || ''},
            {label: 'Version', cell: (n) => n.version || ''},
            {label: 'Status', cell: (n) => h('span', {class: n.live ? 'ok' : 'bad'},
                `${n.live ? '✔ live' : '✘ not live'}${n.draining ? ', draining' : ''}`)},
            {label: 'Started', cell: (n) => timeEl(n.startedAt)},
            {label: 'Last heartbeat', cell: (n) => (n.lastHeartbeat ? timeEl(n.lastHeartbeat) : '—')},
            {label: 'Leases', cell: (n) => ((n.leases || []).length ? h('ul', {class: 'plain'},
                n.leases.map((l) => h('li', null, link(hashOf('backfills', l.jobId), l.jobId),
                    ` ${l.step} (token ${l.token || 0}${l.live ? '' : ', expired'})`))) : 'none')},
          ], r.nodes || [], {caption: 'Replicas by name'}));
    }).catch((e) => {
      if (e.name !== 'AbortError') showPageError(container, e, 'Replicas could not be loaded');
    });
    return {unmount: () => abort.abort()};
  },
};
