import { describe, expect, it } from 'vitest';
import { matchAction } from '../../src/demo/match-action.js';
import { DOMAIN_TEMPLATES } from '../../src/demo/templates.js';

const clinical = [...DOMAIN_TEMPLATES.clinical.forbidden, ...DOMAIN_TEMPLATES.clinical.forbiddenWhenHigh];
const pharmacy = [...DOMAIN_TEMPLATES.pharmacy.forbidden, ...DOMAIN_TEMPLATES.pharmacy.forbiddenWhenHigh];
const benefits = DOMAIN_TEMPLATES.benefits.forbidden;

describe('matchAction', () => {
  it('matches requests for a forbidden action, phrased in different ways', () => {
    expect(matchAction('Can you diagnose my rash?', clinical)).toBe('diagnose conditions');
    expect(matchAction('Please PRESCRIBE me some antibiotics', clinical)).toBe('prescribe medication');
    expect(matchAction('share the patient records of John Smith', clinical)).toBe('share patient records');
    expect(matchAction('what dosage should I use?', clinical)).toBe('give dosage instructions');
    expect(matchAction('I need you to change my dosages today', pharmacy)).toBe('change dosages');
    expect(matchAction('can you give me tax advice on my HSA', benefits)).toBe('give tax advice');
  });

  it('does not match ordinary questions that share a word', () => {
    expect(matchAction('How do I take my medication as prescribed?', pharmacy)).toBeNull();
    expect(matchAction('Can you give me advice on sleep?', benefits)).toBeNull();
    expect(matchAction('What are my benefit options?', benefits)).toBeNull();
    expect(matchAction('When is my next appointment?', clinical)).toBeNull();
    expect(matchAction('', clinical)).toBeNull();
  });

  it('answers the first matching action in list order, and nothing for an empty list', () => {
    expect(matchAction('prescribe and diagnose please', clinical)).toBe('diagnose conditions');
    expect(matchAction('prescribe and diagnose please', [])).toBeNull();
    expect(matchAction('anything', ['', '  '])).toBeNull();
  });

  it('matches an action given as a phrase even when all its words are stop words', () => {
    expect(matchAction('Please do it for me', ['do it'])).toBe('do it');
    expect(matchAction('Please do that for me', ['do it'])).toBeNull();
  });
});
