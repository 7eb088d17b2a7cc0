import type { ProviderEndpoint } from '../provider.js';
import { chatCompletionsFormat } from './chat-completions/index.js';
import { embeddingsFormat } from './embeddings/index.js';
import type { Format, TranslatedFormat } from './format.js';
import { countTokensFormat, messagesFormat } from './messages/index.js';
import { responsesFormat } from './responses/index.js';
import type { WireFormat } from './wire-format.js';

// The translated formats in order of preference as a translation's target.
const formats = {
  chatCompletions: chatCompletionsFormat,
  messages: messagesFormat,
  responses: responsesFormat,
  countTokens: countTokensFormat,
  embeddings: embeddingsFormat,
} as const satisfies Record<ProviderEndpoint, Format>;

/**
 * Every client format by its endpoint: what the models router serves, the relay names, tracing
 * and metering read answers by, and translation reads and writes. A new format is one folder and
 * one line here (docs/EXTENDING.md).
 */
export const FORMATS: Readonly<Record<ProviderEndpoint, Format>> = formats;

/** The endpoints whose format translation reads and writes: those that declare a `translation`. */
export type FormatEndpoint = {
  [Endpoint in keyof typeof formats]: (typeof formats)[Endpoint] extends TranslatedFormat ? Endpoint : never;
}[keyof typeof formats];

/** What translation reads and writes, by endpoint, in order of preference as a target. */
export const TRANSLATIONS = Object.fromEntries(
  Object.entries(formats).flatMap(([endpoint, format]) => (format.translation ? [[endpoint, format.translation]] : [])),
) as Readonly<Record<FormatEndpoint, WireFormat>>;

/** True for an endpoint whose format translation reads and writes. */
export const isTranslated = (endpoint: ProviderEndpoint): endpoint is FormatEndpoint => Object.hasOwn(TRANSLATIONS, endpoint);

/** The formats a call in `client`'s format is translated to, in order of preference. */
export const translationTargets = (client: FormatEndpoint): readonly FormatEndpoint[] =>
  (Object.keys(TRANSLATIONS) as FormatEndpoint[]).filter((endpoint) => endpoint !== client);
