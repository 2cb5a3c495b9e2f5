/**
 * Personal health information detection for the record-scoring sandbox: a pure guard against
 * HIPAA Safe Harbor identifiers, by field name (inside `fields`) and by value pattern (every string
 * and key of the record). It refuses what it recognises; it does not certify that a record is
 * de-identified (a name in a free-text note, for one, passes).
 */

export const PhiIdentifier = {
  name: 'a personal name',
  ssn: 'a social security number',
  mrn: 'a medical record number',
  phone: 'a phone number',
  fax: 'a fax number',
  email: 'an e-mail address',
  address: 'a street address or postal code',
  birth_date: 'a date of birth',
  personal_date: 'a date of death, admission or discharge',
  health_plan: 'a health plan or insurance number',
  account: 'an account or card number',
  license: 'a licence number',
} as const;
export type PhiIdentifier = keyof typeof PhiIdentifier;

export interface PhiFinding {
  /** Dotted path from the record's root, array items by index: `fields.contacts.0.phone`. */
  path: string;
  identifier: PhiIdentifier;
  by: 'name' | 'value';
}

const T = (body: string): RegExp => new RegExp(`(?:^|_)(?:${body})(?:_|$)`);

/**
 * Who a name field may name, as the last word before `name`: Safe Harbor covers the individual and
 * their relatives, employers and household members. The word is the head of the key (`patient_drug_name`
 * names a drug), so a clinical or other thing's name (`test_name`, `facility_name`) never matches.
 */
const PERSON = 'first|last|given|family|full|middle|maiden|legal|preferred|nick|sur|fore|birth'
  + '|patient|pt|person|individual|resident|client|customer|user|member|subscriber|beneficiary|insured|policyholder|holder|cardholder|guarantor|applicant|recipient|dependent'
  + '|employee|employer|guardian|parent|mother|father|spouse|partner|husband|wife|child|son|daughter|sibling|brother|sister|relative|kin|contact';

/** Keys that stand for the patient or a relative (see personReference). */
const PERSON_KEY = /^(?:.*_)?(?:patient|next_of_kin|guardian|spouse|mother|father|emergency_contact|guarantor|policyholder)$/;

/**
 * A bare `name` sits in an object named for what it names: under one of these (the parent key's
 * last word, singular or plural) it names a thing; anywhere else, the top of `fields` included, a
 * person, since a refused record costs a retry but a stored name cannot be taken back.
 */
const THINGS = new Set(
  ('medication|medicine|med|drug|rx|prescription|dose|test|lab|result|panel|assay|analyte|observation|measurement|vital|'
    + 'procedure|surgery|diagnosis|diagnoses|dx|condition|problem|code|coding|concept|term|facility|hospital|clinic|practice|'
    + 'site|location|department|dept|unit|ward|organization|organisation|org|payer|insurer|plan|program|study|trial|protocol|'
    + 'device|vaccine|immunization|allergy|allergies|allergen|reaction|specimen|sample|substance|ingredient|product|manufacturer|'
    + 'file|document|attachment|form|field|variable|column|metric|item|category|class|type|kind|tag|label|source|system|'
    + 'instrument|model|method|scale|score|questionnaire|survey|question|check').split('|'),
);

/** Rules over a normalised field name (snake_case, lower case); a bare `name` is judged by its parent (see THINGS). */
const NAME_RULES: readonly [PhiIdentifier, RegExp][] = [
  ['name', new RegExp(`^(?:.*_)?(?:${PERSON})_?names?$`)],
  ['name', /^names?_(?:first|last|given|family|full|middle|maiden|legal|preferred)$/],
  ['name', /^(?:fname|lname)$/],
  ['ssn', T('ssns?|social_security(?:_number|_no|_num)?|socsec')],
  ['mrn', T('mrns?|medical_record_(?:number|no|num|id)|med_rec_(?:number|no|num)|patient_(?:id|number|no)|chart_(?:number|no|id)')],
  ['phone', T('phones?|telephone|tel|cellphone|cell_phone|mobile_(?:phone|number|no)|msisdn')],
  ['phone', /^mobile$/],
  ['fax', T('fax(?:es)?')],
  ['email', T('e_?mails?|mail_address')],
  ['address', T('address(?:es|\\d*)|addr\\d*|street|street_(?:address|name|line)|zip|zip_?code|post_?code|postal_code')],
  ['birth_date', T('dob|d_o_b|birth_?(?:date|dt|day)|birthdate|birthday|date_of_birth|born_on')],
  ['personal_date', T('date_of_death|death_date|admission_date|admit_date|discharge_date')],
  ['health_plan', T('(?:health_plan|insurance|member|subscriber|beneficiary|medicaid|medicare|group)_(?:id|number|no|num)|policy_(?:number|no|num)|hicn')],
  ['account', T('account_(?:number|no|num|id)|acct_(?:number|no|num)|bank_account|iban|credit_card(?:_number)?|card_number')],
  ['license', T('drivers?_licen[cs]e(?:_number|_no)?|licen[cs]e_(?:number|no)')],
];

// Full words in title or upper case; abbreviations in title case only (upper-case CT, DR, ST are clinical terms).
const STREET_WORDS = ['Street', 'Avenue', 'Road', 'Boulevard', 'Lane', 'Drive', 'Court', 'Way', 'Place', 'Terrace', 'Parkway', 'Highway'];
const STREET_ABBREVIATIONS = ['St', 'Ave', 'Rd', 'Blvd', 'Ln', 'Dr', 'Ct', 'Pl', 'Pkwy', 'Hwy'];
const STREET_SUFFIX = [...STREET_WORDS, ...STREET_WORDS.map((w) => w.toUpperCase()), ...STREET_ABBREVIATIONS].join('|');
const MONTHS = 'jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?';
/** A full date: 03/14/1962, 14.03.62, 1962-03-14, 14 March 1962, March 14, 1962 (a year alone is not an identifier). */
const DATE = [
  '\\d{1,2}[/.-]\\d{1,2}[/.-](?:\\d{4}|\\d{2})(?!\\d)',
  '\\d{4}[/.-]\\d{1,2}[/.-]\\d{1,2}(?!\\d)',
  `\\d{1,2}(?:st|nd|rd|th)?\\s{1,3}(?:${MONTHS})\\.?,?\\s{1,3}\\d{4}`,
  `(?:${MONTHS})\\.?\\s{1,3}\\d{1,2}(?:st|nd|rd|th)?,?\\s{1,3}\\d{4}`,
].join('|');

/**
 * Rules over string values (and keys). Written so ISO dates, times, hashes and ids do not match, and
 * so that each runs in linear time on any input (a body may hold a 1 MiB string): every repetition
 * is bounded, and a match may only start where a lookbehind says a token starts.
 */
const VALUE_RULES: readonly [PhiIdentifier, RegExp][] = [
  ['ssn', /(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])/],
  ['email', /(?<![\w.%+-])[\w.%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}(?![A-Za-z])/],
  // North American forms: (555) 123-4567, 555-123-4567, 555.123.4567, +1 555 123 4567.
  ['phone', /(?<![\w+-])(?:\+?1[\s.-]?)?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?![\w-])/],
  // International E.164-like: a plus sign and 8 to 15 digits, optionally grouped.
  ['phone', /(?<![\w+])\+\d(?:[\s.-]?\d){7,14}(?![\w-])/],
  ['mrn', /\b(?:MRN(?![A-Za-z])|MR\s{0,3}#|medical\s{1,3}record\s{1,3}(?:number|no\.?|#))(?:\s{0,3}[:#-])?\s{0,3}[A-Z0-9-]{0,20}\d/i],
  ['address', new RegExp(`(?<![\\w.-])\\d{1,6}[A-Za-z]?\\s{1,3}(?:[A-Z0-9][A-Za-z0-9'.-]{0,40}\\s{1,3}){1,4}(?:${STREET_SUFFIX})\\b`)],
  ['address', /\bP\.?\s?O\.?\s{0,3}Box\s{1,3}\d/i],
  // Labelled only: an unlabelled nine-digit number is more often an id than an SSN.
  ['ssn', /\b(?:SSN|SS\s?#|social\s{1,3}security(?:\s{1,3}(?:number|no\.?|#))?)(?:\s{0,3}[:#=-])?\s{0,3}\d{3}[\s-]?\d{2}[\s-]?\d{4}(?![\w-])/i],
  // Labelled only: a date alone (a visit, a collection) is not a date of birth.
  ['birth_date', new RegExp(`\\b(?:DOB|D\\.O\\.B\\.?|date\\s{1,3}of\\s{1,3}birth|birth\\s{0,3}date|born(?:\\s{1,3}on)?)(?:\\s{0,3}[:#=-])?\\s{0,3}(?:${DATE})`, 'i')],
];

/**
 * Every identifier found in `record`, in document order, one finding per path and identifier.
 * Field names are judged only inside `fields` (the other keys are the request schema's own); a
 * flagged field's value is not searched further. `record` must be shallow enough to recurse over
 * (the request schema bounds its depth).
 */
export function findPhi(record: unknown): PhiFinding[] {
  const found: PhiFinding[] = [];
  const seen = new Set<string>();
  const add = (path: string, identifier: PhiIdentifier, by: PhiFinding['by']): void => {
    const id = `${path}\u0000${identifier}`;
    if (seen.has(id)) return;
    seen.add(id);
    found.push({ path, identifier, by });
  };
  const visit = (value: unknown, path: readonly string[]): void => {
    if (typeof value === 'string') {
      for (const [identifier, rule] of VALUE_RULES) if (rule.test(value)) add(path.join('.'), identifier, 'value');
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const inFields = path[0] === 'fields';
    // The nearest enclosing key inside `fields` (array indices skipped): what a bare `name` belongs to.
    const parent = inFields ? path.slice(1).findLast((p) => !/^\d+$/.test(p)) : undefined;
    for (const [key, child] of Object.entries(value)) {
      const childPath = [...path, key];
      const at = childPath.join('.');
      if (!Array.isArray(value)) {
        for (const [identifier, rule] of VALUE_RULES) if (rule.test(key)) add(at, identifier, 'value');
        const byName = inFields ? (nameIdentifier(key, parent) ?? personReference(key, child)) : undefined;
        if (byName !== undefined && carriesData(child)) {
          add(at, byName, 'name');
          continue;
        }
      }
      visit(child, childPath);
    }
  };
  visit(record, []);
  return found;
}

/**
 * The identifier a field name stands for, if any: `patientName`, `first-name`, `SSN`, `date_of_birth`.
 * `parent` is the key of the object holding it (none at the top of `fields`): a bare `name` under
 * `medication` or `labs` names a thing, anywhere else a person.
 */
export function nameIdentifier(key: string, parent?: string): PhiIdentifier | undefined {
  const normal = normalise(key);
  if (/^names?$/.test(normal)) return parent !== undefined && isThing(normalise(parent)) ? undefined : 'name';
  for (const [identifier, rule] of NAME_RULES) if (rule.test(normal)) return identifier;
  return undefined;
}

/** `next_of_kin: "Jane Roe"`: a key standing for a person, holding text, holds that person's name. */
function personReference(key: string, value: unknown): PhiIdentifier | undefined {
  return typeof value === 'string' && PERSON_KEY.test(normalise(key)) ? 'name' : undefined;
}

function normalise(key: string): string {
  return key
    .replace(/([a-z\d])([A-Z])/g, '$1_$2')
    .replace(/([A-Z])(?=[A-Z][a-z])/g, '$1_')
    .toLowerCase()
    .replace(/[^a-z\d]+/g, '_')
    .replace(/^_+|_+$/g, '');
}

/** Whether a normalised key's last word, singular or plural, is in THINGS (`lab_results`, `medications`). */
function isThing(normal: string): boolean {
  const last = normal.slice(normal.lastIndexOf('_') + 1);
  return [last, last.replace(/ies$/, 'y'), last.replace(/es$/, ''), last.replace(/s$/, '')].some((w) => THINGS.has(w));
}

/** A flag such as `has_phone: true` or an empty `email: ""` reveals nothing; text, numbers and content do. */
function carriesData(value: unknown): boolean {
  if (typeof value === 'string') return value.trim() !== '';
  if (typeof value === 'number') return true;
  if (value === null || typeof value !== 'object') return false;
  return Object.keys(value).length > 0;
}

/** One line naming each offending path with what it looks like. */
export function describePhi(findings: readonly PhiFinding[]): string {
  const byPath = new Map<string, string[]>();
  for (const f of findings) byPath.set(f.path, [...(byPath.get(f.path) ?? []), f.identifier]);
  return [...byPath].map(([path, ids]) => `${path} (${ids.join(', ')})`).join(', ');
}
