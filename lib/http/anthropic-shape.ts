import type { Context } from 'koa';

/**
 * True when the request asks for Anthropic's shapes: Anthropic's SDKs send `anthropic-version`
 * on every request, OpenAI's never do.
 */
export const asksAnthropicShape = (ctx: Context): boolean => ctx.get('anthropic-version') !== '';
