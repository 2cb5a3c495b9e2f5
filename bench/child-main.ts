/**
 * The entry of a bench load generator run as its own process: reads its spec (JSON) from argv,
 * prints the result as one JSON line and exits 0, or prints the error and exits 1.
 */
export function childMain<S, R>(main: (spec: S) => Promise<R>): void {
  const spec = JSON.parse(process.argv[2] ?? '{}') as S;
  main(spec).then(
    (result) => {
      process.stdout.write(`${JSON.stringify(result)}\n`);
      process.exit(0);
    },
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits `warmup` s, then measures for `seconds` s (`measuring(true)` … `measuring(false)`): the window's length and this process's CPU in it. */
export async function measureWindow(warmup: number, seconds: number, measuring: (on: boolean) => void): Promise<{ seconds: number; cpuSeconds: number }> {
  await sleep(warmup * 1000);
  measuring(true);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(seconds * 1000);
  measuring(false);
  const cpu = process.cpuUsage(cpu0);
  return { seconds: (performance.now() - t0) / 1000, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}
