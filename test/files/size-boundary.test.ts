import test from 'ava';
import { filesApp } from '../helpers/files-app.js';
import { multipart, pdfOf, uploadParts } from '../helpers/multipart.js';
import { rawRequest } from '../helpers/raw-request.js';

// api.md's own number, with the default limits: the other tests use a small limit to stay fast.
const MAX = 26_214_400;

for (const chunked of [false, true]) {
  const how = chunked ? 'chunked, without Content-Length' : 'with Content-Length';
  test(`a PDF of exactly 26,214,400 bytes is accepted and 26,214,401 refused with 413, ${how}`, async (t) => {
    const app = await filesApp();
    t.teardown(() => app.close());
    const send = (bytes: number) => {
      const { body, contentType } = multipart(uploadParts(pdfOf(bytes)));
      return rawRequest(`${app.url}/v1/files`, { headers: { authorization: `Bearer ${app.keys.a}`, 'content-type': contentType }, body, chunked });
    };
    const accepted = await send(MAX);
    t.is(accepted.status, 200);
    t.like(JSON.parse(accepted.body.toString()), { bytes: MAX });
    const refused = await send(MAX + 1);
    t.is(refused.status, 413);
    t.deepEqual(JSON.parse(refused.body.toString()), {
      error: { message: 'File is too large', type: 'invalid_request_error', param: null, code: 'file_too_large' },
    });
    t.is(refused.headers.connection, 'close');
    t.deepEqual(await app.tempFiles(), []);
    t.is((await app.files.usage('acct-a', app.clock.seconds)).files, 1);
  });
}
