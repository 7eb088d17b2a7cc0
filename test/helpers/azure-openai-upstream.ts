import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { listen } from './http.js';

// A mock of Azure OpenAI's data plane, as its REST reference describes it (not as our writer
// writes): the dated API's deployment paths (`/openai/deployments/{deployment}/chat/completions`,
// `/embeddings`, with `api-version`) and its `/openai/responses?api-version=`, and the v1 API
// (`/openai/v1/...`, the deployment in `model`); `api-key` or an Entra ID bearer token; Azure's
// content filter annotations (`prompt_filter_results`, a first stream chunk with no choices,
// `content_filter_results` on each choice), its 400 `content_filter` error with `innererror`, and
// its 429 with `retry-after`, `retry-after-ms` and `x-ratelimit-*`.

export const AZURE_API_KEY = 'azure-provider-key-5b1e';
export const AZURE_TOKEN = 'eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.azure-token';
export const AZURE_API_VERSION = '2024-10-21';
/** The deployments the mock knows. */
export const DEPLOYMENTS = ['gpt-4o-mini', 'gpt-4o-east', 'text-embedding-3-small'];
/** A prompt holding this is refused by the content filter (400); one holding FILTERED_OUTPUT has its completion filtered (finish_reason content_filter). */
export const FILTERED_PROMPT = 'trigger the prompt filter';
export const FILTERED_OUTPUT = 'trigger the output filter';
/** The encrypted content of the reasoning item the mock answers a request asking for reasoning with. */
export const REASONING_SEALED = 'gAAAAABazure-sealed-reasoning==';

/** A request the mock received. */
export interface AzureRequest {
  path: string;
  headers: IncomingHttpHeaders;
  /** The body as sent, and parsed. */
  raw: string;
  body: Record<string, unknown>;
}

const safe = { filtered: false, severity: 'safe' };
const FILTER_RESULTS = { hate: safe, self_harm: safe, sexual: safe, violence: safe };
const PROMPT_FILTER_RESULTS = [{ prompt_index: 0, content_filter_results: FILTER_RESULTS }];
// Of the 19 input tokens, 8 read from the prompt cache; of the 7 output tokens, 3 of reasoning.
const USAGE = {
  prompt_tokens: 19,
  completion_tokens: 7,
  total_tokens: 26,
  prompt_tokens_details: { cached_tokens: 8, audio_tokens: 0 },
  completion_tokens_details: { reasoning_tokens: 3, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
};
const RESPONSES_USAGE = {
  input_tokens: 19,
  output_tokens: 7,
  total_tokens: 26,
  input_tokens_details: { cached_tokens: 8 },
  output_tokens_details: { reasoning_tokens: 3 },
};

const sse = (data: unknown, name?: string) => `${name === undefined ? '' : `event: ${name}\n`}data: ${JSON.stringify(data)}\n\n`;
const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', 'apim-request-id': 'apim-1', ...headers }).end(JSON.stringify(body));
const azureError = (res: ServerResponse, status: number, code: string, message: string) => json(res, status, { error: { code, message } });

interface Call {
  name: string;
  args: string;
}

/** The function calls the mock answers a request that offers tools and has no tool results yet: two in parallel. */
const CALLS: Call[] = [
  { name: 'get_weather', args: '{"city":"Paris"}' },
  { name: 'get_weather', args: '{"city":"London"}' },
];

/** The text of a request (its messages or input), to script the answer by. */
const promptOf = (body: Record<string, unknown>) => JSON.stringify(body.messages ?? body.input ?? '');

/** Tool results the request carries, in its order: the text the answer says is "results: a | b". */
function toolResults(body: Record<string, unknown>): string[] | null {
  const messages = (body.messages as Array<{ role: string; content: unknown }> | undefined)?.filter((message) => message.role === 'tool');
  if (messages && messages.length > 0)
    return messages.map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content)));
  const outputs = Array.isArray(body.input)
    ? (body.input as Array<{ type?: string; output?: unknown }>).filter((item) => item.type === 'function_call_output')
    : [];
  return outputs.length > 0 ? outputs.map((item) => String(item.output)) : null;
}

function chat(res: ServerResponse, body: Record<string, unknown>, model: string): void {
  const results = toolResults(body);
  const calls = Array.isArray(body.tools) && results === null ? CALLS : [];
  const filtered = promptOf(body).includes(FILTERED_OUTPUT);
  const text = results === null ? (filtered ? '' : 'Hello from Azure') : `results: ${results.join(' | ')}`;
  const finish = calls.length > 0 ? 'tool_calls' : filtered ? 'content_filter' : 'stop';
  const toolCalls = calls.map((call, index) => ({ id: `call_${index}`, type: 'function', function: { name: call.name, arguments: call.args } }));
  const base = { id: 'chatcmpl-AZ1', created: 1_765_000_000, model, system_fingerprint: 'fp_azure' };
  const choiceFilter = filtered ? { ...FILTER_RESULTS, violence: { filtered: true, severity: 'medium' } } : FILTER_RESULTS;
  if (body.stream !== true) {
    const message = {
      role: 'assistant',
      content: calls.length > 0 ? null : text,
      refusal: null,
      annotations: [],
      ...(calls.length > 0 && { tool_calls: toolCalls }),
    };
    json(res, 200, {
      ...base,
      object: 'chat.completion',
      prompt_filter_results: PROMPT_FILTER_RESULTS,
      choices: [{ index: 0, message, finish_reason: finish, logprobs: null, content_filter_results: choiceFilter }],
      usage: USAGE,
    });
    return;
  }
  const withUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  const chunk = (delta: unknown, finishReason: string | null, filter: unknown = {}) =>
    sse({
      ...base,
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null, content_filter_results: filter }],
      ...(withUsage && { usage: null }),
    });
  res.writeHead(200, { 'content-type': 'text/event-stream', 'apim-request-id': 'apim-1' });
  // Azure's first chunk: the prompt's filter results, no choices, empty id and model.
  res.write(sse({ choices: [], created: 0, id: '', model: '', object: '', prompt_filter_results: PROMPT_FILTER_RESULTS }));
  res.write(chunk({ role: 'assistant', content: '', refusal: null }, null));
  calls.forEach((call, index) => {
    res.write(chunk({ tool_calls: [{ index, id: `call_${index}`, type: 'function', function: { name: call.name, arguments: '' } }] }, null));
    res.write(chunk({ tool_calls: [{ index, function: { arguments: call.args } }] }, null));
  });
  if (text !== '') {
    res.write(chunk({ content: text.slice(0, 5) }, null, FILTER_RESULTS));
    res.write(chunk({ content: text.slice(5) }, null, FILTER_RESULTS));
  }
  res.write(chunk({}, finish, filtered ? choiceFilter : {}));
  if (withUsage) res.write(sse({ ...base, object: 'chat.completion.chunk', choices: [], usage: USAGE }));
  res.end('data: [DONE]\n\n');
}

function responses(res: ServerResponse, body: Record<string, unknown>, model: string): void {
  const results = toolResults(body);
  const calls = Array.isArray(body.tools) && results === null ? CALLS : [];
  const text = results === null ? 'Hello from Azure' : `results: ${results.join(' | ')}`;
  const message = { id: 'msg_az1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] };
  const functionCalls = calls.map((call, index) => ({
    id: `fc_${index}`,
    type: 'function_call',
    status: 'completed',
    call_id: `call_${index}`,
    name: call.name,
    arguments: call.args,
  }));
  // Asked for reasoning, a reasoning model answers with its reasoning first, sealed (as `include: ["reasoning.encrypted_content"]` gets it).
  const reasoning = body.reasoning === undefined ? [] : [{ id: 'rs_az1', type: 'reasoning', summary: [], encrypted_content: REASONING_SEALED }];
  const output: Array<Record<string, unknown>> = [...reasoning, ...(calls.length > 0 ? functionCalls : [message])];
  const response = (status: string, items: unknown[], usage: unknown) => ({
    id: 'resp_az1',
    object: 'response',
    created_at: 1_765_000_000,
    status,
    model,
    output: items,
    usage,
    error: null,
    incomplete_details: null,
    parallel_tool_calls: true,
    tools: body.tools ?? [],
  });
  if (body.stream !== true) {
    json(res, 200, response('completed', output, RESPONSES_USAGE));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  let sequence = 0;
  const emit = (data: Record<string, unknown>) => res.write(sse({ ...data, sequence_number: sequence++ }, String(data.type)));
  emit({ type: 'response.created', response: response('in_progress', [], null) });
  output.forEach((item, index) => {
    if (item.type === 'message') {
      emit({ type: 'response.output_item.added', output_index: index, item: { ...message, status: 'in_progress', content: [] } });
      emit({
        type: 'response.content_part.added',
        item_id: 'msg_az1',
        output_index: index,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      });
      emit({ type: 'response.output_text.delta', item_id: 'msg_az1', output_index: index, content_index: 0, delta: text });
      emit({ type: 'response.output_text.done', item_id: 'msg_az1', output_index: index, content_index: 0, text });
      emit({ type: 'response.content_part.done', item_id: 'msg_az1', output_index: index, content_index: 0, part: message.content[0] });
    } else if (item.type === 'reasoning') {
      emit({ type: 'response.output_item.added', output_index: index, item });
    } else {
      const call = item as (typeof functionCalls)[number];
      emit({ type: 'response.output_item.added', output_index: index, item: { ...call, status: 'in_progress', arguments: '' } });
      emit({ type: 'response.function_call_arguments.delta', item_id: call.id, output_index: index, delta: call.arguments });
      emit({ type: 'response.function_call_arguments.done', item_id: call.id, output_index: index, arguments: call.arguments });
    }
    emit({ type: 'response.output_item.done', output_index: index, item });
  });
  emit({ type: 'response.completed', response: response('completed', output, RESPONSES_USAGE) });
  res.end();
}

/** A vector per input, from its text: [its length, its first character's code, 0.5]. */
export const azureVector = (input: unknown) => {
  const text = typeof input === 'string' ? input : JSON.stringify(input);
  return [text.length, text.charCodeAt(0), 0.5];
};

function embeddings(res: ServerResponse, body: Record<string, unknown>, model: string): void {
  const inputs = Array.isArray(body.input) && !body.input.every((item) => typeof item === 'number') ? body.input : [body.input];
  const base64 = body.encoding_format === 'base64';
  const data = inputs.map((input, index) => {
    const vector = azureVector(input);
    const embedding = base64 ? Buffer.from(Float32Array.from(vector).buffer).toString('base64') : vector;
    return { object: 'embedding', index, embedding };
  });
  const tokens = inputs.length * 4;
  json(res, 200, { object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
}

const OPERATIONS = { 'chat/completions': chat, responses, embeddings } as const;
type Operation = keyof typeof OPERATIONS;

/** The operation and deployment a path names (the v1 API: the deployment in `model`), or null for a path Azure does not have. */
function route(url: URL, body: Record<string, unknown>): { operation: Operation; deployment: string } | null {
  const version = url.searchParams.get('api-version');
  const v1 = /^\/openai\/v1\/(chat\/completions|responses|embeddings)$/.exec(url.pathname);
  if (v1) return { operation: v1[1] as Operation, deployment: String(body.model) };
  if (version === null) return null;
  if (url.pathname === '/openai/responses') return { operation: 'responses', deployment: String(body.model) };
  const dated = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings)$/.exec(url.pathname);
  return dated ? { operation: dated[2] as Operation, deployment: decodeURIComponent(dated[1] as string) } : null;
}

/**
 * The mock on a loopback port. `received` holds every request; `throttle(n)` answers the next n
 * requests 429; `tokens` the bearer tokens it accepts besides AZURE_TOKEN.
 */
export async function azureOpenAIUpstream() {
  const received: AzureRequest[] = [];
  const tokens = new Set([AZURE_TOKEN]);
  let throttled = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = JSON.parse(raw || '{}') as Record<string, unknown>;
      received.push({ path: req.url ?? '', headers: req.headers, raw, body });
      const url = new URL(req.url ?? '/', 'http://azure.invalid');
      const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (req.headers['api-key'] !== AZURE_API_KEY && (bearer === undefined || !tokens.has(bearer))) {
        azureError(res, 401, '401', 'Access denied due to invalid subscription key or wrong API endpoint.');
        return;
      }
      const found = route(url, body);
      if (found === null) return azureError(res, 404, '404', 'Resource not found');
      if (!DEPLOYMENTS.includes(found.deployment)) {
        return azureError(res, 404, 'DeploymentNotFound', 'The API deployment for this resource does not exist.');
      }
      if (throttled > 0) {
        throttled--;
        const message = `Requests to the ChatCompletions_Create Operation under Azure OpenAI API version ${AZURE_API_VERSION} have exceeded token rate limit of your current pricing tier. Please retry after 2 seconds.`;
        json(
          res,
          429,
          { error: { code: '429', message } },
          { 'retry-after': '2', 'retry-after-ms': '2000', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-remaining-tokens': '0' },
        );
        return;
      }
      if (promptOf(body).includes(FILTERED_PROMPT)) {
        json(res, 400, {
          error: {
            message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
            type: null,
            param: 'prompt',
            code: 'content_filter',
            status: 400,
            innererror: { code: 'ResponsibleAIPolicyViolation', content_filter_result: { ...FILTER_RESULTS, violence: { filtered: true, severity: 'high' } } },
          },
        });
        return;
      }
      OPERATIONS[found.operation](res, body, found.deployment);
    });
  });
  const { url, close } = await listen(server);
  return {
    url,
    received,
    tokens,
    throttle(times: number) {
      throttled = times;
    },
    close,
  };
}
