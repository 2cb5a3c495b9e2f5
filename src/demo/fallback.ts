import { ensureError } from '../errors.js';
import type { LanguageModel, ReplyInput, SuggestInput, Suggestion } from './language-model.js';
import type { Logger } from '../log.js';

/** What was generated and by whom. `fallbackFrom` names the provider that failed, if one did. */
export interface Generated<T> {
  value: T;
  provider: string;
  fallbackFrom: string | null;
}

export type DemoLog = Logger;

/**
 * Asks `primary`; on any failure logs one warning (provider, operation and error, never the key)
 * and answers with `backup`, which must not fail (the built-in generator). With `primary` equal to
 * `backup` there is nothing to fall back from.
 */
export class FallbackModel {
  constructor(
    readonly primary: LanguageModel,
    private readonly backup: LanguageModel,
    private readonly log: DemoLog,
  ) {}

  suggest(input: SuggestInput): Promise<Generated<Suggestion>> {
    return this.run('suggest', (m) => m.suggest(input));
  }

  reply(input: ReplyInput): Promise<Generated<string>> {
    return this.run('reply', (m) => m.reply(input));
  }

  private async run<T>(operation: string, call: (model: LanguageModel) => Promise<T>): Promise<Generated<T>> {
    if (this.primary === this.backup) return { value: await call(this.backup), provider: this.backup.provider, fallbackFrom: null };
    try {
      return { value: await call(this.primary), provider: this.primary.provider, fallbackFrom: null };
    } catch (thrown) {
      const error = ensureError(thrown);
      this.log.warn({
        provider: this.primary.provider,
        model: this.primary.model,
        operation,
        error: error.message,
        ...('code' in error ? { code: error.code } : {}),
      }, 'language model failed; answering with the built-in generator');
      return { value: await call(this.backup), provider: this.backup.provider, fallbackFrom: this.primary.provider };
    }
  }
}
