import type { Context } from 'koa';

/**
 * True when the request asks for Anthropic's shapes: it carries `anthropic-version`, whatever its
 * value. Anthropic's SDKs send it on every request, OpenAI's never do.
 */
export const asksAnthropicShape = (ctx: Context): boolean => ctx.req.headers['anthropic-version'] !== undefined;
