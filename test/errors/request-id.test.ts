import test from 'ava';
import { newRequestId } from '../../lib/errors/request-id.js';

test('10,000 request ids are distinct and well-formed: req_ and 32 alphanumerics', (t) => {
  const ids = Array.from({ length: 10_000 }, () => newRequestId());
  for (const id of ids) t.regex(id, /^req_[A-Za-z0-9]{32}$/);
  t.is(new Set(ids).size, ids.length);
});
