// The decisions an operator takes on a job, each shown only when the job's
// state allows it and the caller's allowedMethods include its RPC method.
// Each opens a dialog asking for a reason (required where the request
// message has one), then POSTs /v1/backfills/{id}:{verb}.

import {api} from './api.js';
import {actionDialog} from './dialogs.js';
import {button, h} from './dom.js';
import {can} from './session.js';

const S = (name) => `BACKFILL_STATE_${name}`;
const REASON = {name: 'reason', label: 'Reason', kind: 'textarea', required: true,
                hint: 'Recorded in the audit log.'};

export const JOB_ACTIONS = [
  {
    verb: 'approve', method: 'ApproveBackfill', label: 'Approve',
    states: [S('AWAITING_APPROVAL')],
    description: 'Publishes the job\'s staged partitions. The approval is ' +
        'recorded in the audit log and in the lineage of what it publishes.',
    fields: [{...REASON, hint: 'Why publishing is right; recorded with the approval.'}],
  },
  {
    verb: 'approve', method: 'ApproveBackfill', label: 'Approve with override',
    states: [S('VALIDATION_FAILED')], danger: true,
    body: {overrideValidation: true},
    description: 'The job failed its validation checks. Approving it ' +
        'publishes data that failed them (override_validation).',
    fields: [{...REASON, hint: 'Why publishing data that failed the checks is right.'}],
  },
  {
    verb: 'pause', method: 'PauseBackfill', label: 'Pause',
    states: [S('QUEUED'), S('RUNNING')],
    description: 'No new partitions start; running ones finish and ' +
        'checkpoint. The job keeps its partitions.',
    fields: [REASON],
  },
  {
    verb: 'resume', method: 'ResumeBackfill', label: 'Resume',
    states: [S('PAUSED')],
    description: 'The job continues from its checkpoints.',
    fields: [REASON],
  },
  {
    verb: 'retry', method: 'RetryBackfill', label: 'Retry',
    states: [S('FAILED')],
    description: 'Runs the failed and never-run partitions again, keeping ' +
        'the staged ones and the pinned inputs.',
    fields: [REASON],
  },
  {
    verb: 'confirm', method: 'ConfirmBackfill', label: 'Confirm downstream',
    states: [S('SUCCEEDED'), S('DOWNSTREAM_UNHEALTHY')],
    description: 'Invalidates and probes every downstream consumer of the ' +
        'job\'s datasets again.',
    fields: [REASON],
  },
  {
    verb: 'rollback', method: 'RollbackBackfill', label: 'Roll back',
    states: [S('SUCCEEDED'), S('DOWNSTREAM_UNHEALTHY')], danger: true,
    description: 'Restores exactly the rows the job replaced in its ' +
        'partitions, in one transaction; the job ends ROLLED_BACK.',
    fields: [
      {...REASON, hint: 'Why the job\'s data is withdrawn; recorded in lineage.'},
      {name: 'force', label: 'Also roll back later jobs that published some of ' +
          'these partitions (force)', kind: 'checkbox'},
    ],
  },
  {
    verb: 'cancel', method: 'CancelBackfill', label: 'Cancel',
    states: [S('QUEUED'), S('RUNNING'), S('PAUSED'), S('FAILED'),
             S('VALIDATION_FAILED'), S('AWAITING_APPROVAL')],
    danger: true,
    description: 'Ends the job as CANCELLED: nothing of it is published and ' +
        'its staging is dropped.',
    fields: [REASON],
  },
];

// The actions shown for `job` to this caller.
export function actionsFor(job) {
  return JOB_ACTIONS.filter((a) => a.states.includes(job.state) && can(a.method));
}

// Buttons for the job's actions; onDone(updatedJob, action) after one
// succeeded.
export function actionButtons(job, onDone) {
  const actions = actionsFor(job);
  if (actions.length === 0) return null;
  return h('div', {class: 'actions', role: 'group', 'aria-label': 'Decisions'},
      actions.map((action) => button(action.label, async () => {
        const result = await actionDialog({
          title: `${action.label} ${job.id}`,
          description: action.description,
          fields: action.fields,
          confirmLabel: action.label,
          danger: action.danger,
          submit: (values) => api.jobAction(job.id, action.verb,
              {...values, ...(action.body || {})}),
        });
        if (result) onDone(result, action);
      }, {class: action.danger ? 'danger' : ''})));
}
