/**
 * @svc/sdk: the TypeScript client of the svc sidecar. Middleware lives in
 * "@svc/sdk/express" and "@svc/sdk/fastify", SAML gateway helpers in
 * "@svc/sdk/saml".
 */

export {
  type AuthorizeOptions,
  type Decision,
  DEFAULT_SIDECAR_URL,
  DEFAULT_TIMEOUT_MS,
  FAIL_OPEN_NOTICE,
  type FailMode,
  type PlanResourcesOptions,
  MAX_TIMEOUT_MS,
  SidecarRequestError,
  SidecarUnavailableError,
  SvcClient,
  type SvcClientOptions,
  SvcError,
  type TokenDecision,
} from "./client.js";
export { type ComparisonOp, type Condition, columnName, type Dialect, DIALECTS, holds, likePattern, parseCondition, parsePlan,
  permits, type Plan, PlanError, type PlanKind, type PlanResource, type PrismaFieldFilter, type PrismaWhere, prismaWhere,
  type Scalar, type SqlFilter, type StringTestOp, toSql } from "./plan.js";
export { DEFAULT_CONFIG_FILE, readSdkTable, resolveSettings, type ResolvedSettings, type SdkKeys,
  type Setting } from "./config.js";
export { apiKey, bearerToken, type DenyBody, type Refusal, refusalOf } from "./web.js";
