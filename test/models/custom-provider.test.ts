import { Readable } from 'node:stream';
import test from 'ava';
import type { Provider, ProviderRequest } from '../../lib/models/provider.js';
import { modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';

// A team's own upstream, written in the test as a user would write it: no kind, no registry, no
// fork. It answers with Node streams on one endpoint, with a fetch Response on the other.
const received: ProviderRequest[] = [];
const inHouse: Provider = {
  id: 'in-house',
  async chatCompletions(request) {
    received.push(request);
    const answer = { id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: request.body.model, choices: [] };
    return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: Readable.from([JSON.stringify(answer)]) };
  },
  async messages(request) {
    received.push(request);
    const events = ['event: message_start\ndata: {"type":"message_start"}\n\n', 'event: message_stop\ndata: {"type":"message_stop"}\n\n'];
    return new Response(events.join(''), { headers: { 'content-type': 'text/event-stream' } });
  },
};

const gateway = await modelsApp({ catalog: [{ id: 'house-model', provider: 'in-house', upstreamModel: 'house-v2' }], providers: [inHouse] });
test.after.always(() => gateway.close());

test.serial('a Provider object of the user is served on both endpoints like a built-in one, files attached', async (t) => {
  const key = await gateway.keyFor();
  const fileId = await gateway.storePdf(makePdf(1), { filename: 'memo.pdf' });
  const chat = await gateway.post(
    '/v1/chat/completions',
    { model: 'house-model', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: fileId } }] }] },
    { 'x-api-key': key },
  );
  t.is(chat.status, 200);
  t.like(await chat.json(), { id: 'chatcmpl-1', model: 'house-model' });
  const [sent] = received.splice(0);
  t.is(sent?.body.model, 'house-v2', 'the model is renamed to its upstreamModel');
  t.regex(JSON.stringify(sent?.body), /"filename":"memo\.pdf","file_data":"data:application\/pdf;base64,/, 'the stored PDF is inlined');

  const streamed = await gateway.post(
    '/v1/messages',
    { model: 'house-model', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  );
  t.is(streamed.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  t.is(await streamed.text(), 'event: message_start\ndata: {"type":"message_start"}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n');
  t.deepEqual(received.splice(0).map((request) => request.headers), [{ 'anthropic-version': '2023-06-01' }]);
});

test('a Provider that spreads the request it is handed still gets a signal that aborts the call when the upstream is silent', async (t) => {
  // A wrapper as a user writes one: it passes the request on with one field changed.
  const aborted: boolean[] = [];
  const silent: Provider = {
    id: 'silent',
    chatCompletions(request) {
      const passedOn: ProviderRequest = { ...request, headers: { ...request.headers, 'x-team': 'a' } };
      return new Promise((_resolve, reject) => {
        passedOn.signal.addEventListener('abort', () => {
          aborted.push(passedOn.signal.aborted);
          reject(new Error('aborted'));
        });
      });
    },
  };
  const impatient = await modelsApp({ catalog: [{ id: 'silent-model', provider: 'silent', upstreamModel: 'v1' }], providers: [silent], timeoutMs: 50 });
  t.teardown(() => impatient.close());
  const answer = await impatient.post('/v1/chat/completions', { model: 'silent-model', messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': await impatient.keyFor() });
  t.is(answer.status, 504);
  t.deepEqual(aborted, [true]);
});
