import type { SpendBudgets } from '../../cost/budgets.js';
import type { FileRecord } from '../../files/file-store.js';
import type { ModelLimiter } from '../../quota/model-limiter.js';
import type { ModelLimits } from '../../quota/model-limits.js';
import type { ModelRequestState, VerifiedKey } from '../../state.js';
import type { FileStores } from '../attachments.js';
import type { ResponseCaching } from '../cache/response-caching.js';
import type { JsonObject } from '../content.js';
import type { EndpointFormat } from '../endpoint-format.js';
import type { ModelRoute } from '../routing/deployments.js';
import type { Planner } from '../routing/plan.js';

/** What `modelEndpoint()` sets up once for one endpoint, and each step of its calls reads. */
export interface EndpointSetup {
  format: EndpointFormat;
  catalogIds: ReadonlySet<string>;
  /** The catalog's type of model this endpoint serves. */
  servedType: 'chat' | 'embeddings';
  planner: Planner;
  limiter: ModelLimiter;
  modelLimits: ModelLimits;
  budgets: SpendBudgets;
  stores: FileStores | undefined;
  caching: ResponseCaching | undefined;
  nowMs: () => number;
  timeoutMs: number;
  bodyLimit: number;
  maxUpstreamBytes: number;
  maxAttachedBytes: number;
}

/** One call that `admit()` let through: what the next steps work on. */
export interface AdmittedCall {
  key: VerifiedKey;
  /** The client's body, as it sent it. */
  body: JsonObject;
  /** The catalog id asked for. */
  model: string;
  route: ModelRoute;
  /** The client's headers meant for the upstream. */
  headers: Record<string, string>;
  stream: boolean;
  state: ModelRequestState;
  /** The files it attaches, found (their bytes not read yet). */
  files: FileRecord[];
  /** The key's limits over the endpoint's. */
  limits: ModelLimits;
}
