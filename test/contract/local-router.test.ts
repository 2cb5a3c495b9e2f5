import { LocalCommandRouter } from '../../src/bus/local-router.js';
import { runCommandRouterContract } from './command-router.case.js';

runCommandRouterContract('LocalCommandRouter', ['many-owners'], () => {
  const router = new LocalCommandRouter();
  return Promise.resolve({ router, dispose: () => router.close() });
});
