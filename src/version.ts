/** The service version: /health, the webhook user agent, package.json (a test holds them equal). */
export const VERSION = '0.2.0';
