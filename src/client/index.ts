/** Public surface for receivers and agent runtimes. */
export { WebhookVerificationError, verifyWebhook } from './verify-webhook.js';
export type { VerifyOptions } from './verify-webhook.js';
export { verifyReceipt } from './verify-receipt.js';
export { VigilClient, VigilClientError } from './vigil-client.js';
export type { IngestResult, Receipt, VigilClientOptions, VigilEvent } from './vigil-client.js';
