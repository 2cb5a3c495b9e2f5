/**
 * Which of `actions` a chat message asks for, if any: the first that matches, in list order. Used
 * for forbidden actions (a match raises the event's dti) and allowed ones (they shape the built-in
 * reply). A plain-words heuristic, pure and deterministic, so the score never depends on which
 * language model answered:
 * - the action's words appear in the message as a phrase, or
 * - at least half of the action's content words appear, including its first one (usually the
 *   verb: "diagnose conditions" matches "can you diagnose my rash?", "give tax advice" does not
 *   match "give me advice on sleep").
 * The first content word must appear as written (a plural `s` aside): a request names the verb in
 * its base form ("can you prescribe …"), while "take my medication as prescribed" asks for no
 * prescription. The other words are compared by a crude stem (plural `s` dropped, then the first
 * 6 letters), so "records" matches "record" and "dosage" matches "dosages".
 */
export function matchAction(message: string, actions: readonly string[]): string | null {
  const words = tokens(message);
  const text = ` ${words.join(' ')} `;
  const exact = new Set(words.map(singular));
  const stems = new Set(words.map(stem));
  for (const action of actions) {
    const actionWords = tokens(action);
    if (actionWords.length === 0) continue;
    if (text.includes(` ${actionWords.join(' ')} `)) return action;
    const content = actionWords.filter((w) => !STOP.has(w));
    if (content.length === 0 || !exact.has(singular(content[0]!))) continue;
    const hits = 1 + content.slice(1).filter((w) => stems.has(stem(w))).length;
    if (hits * 2 >= content.length) return action;
  }
  return null;
}

function tokens(text: string): string[] {
  return text
    .normalize('NFKD')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== '');
}

function singular(word: string): string {
  return word.length > 3 && word.endsWith('s') && !word.endsWith('ss') ? word.slice(0, -1) : word;
}

function stem(word: string): string {
  return singular(word).slice(0, 6);
}

/** Words that carry no meaning of their own in an action name (generic verbs included). */
const STOP = new Set([
  'a', 'an', 'the', 'to', 'of', 'for', 'on', 'in', 'at', 'by', 'with', 'without', 'from', 'or', 'and', 'as', 'any',
  'about', 'into', 'other', 'their', 'your', 'my', 'our', 'me', 'you', 'it', 'them',
  'give', 'make', 'get', 'take', 'provide', 'do', 'be', 'have', 'use',
]);
