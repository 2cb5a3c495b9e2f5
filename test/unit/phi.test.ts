import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { describePhi, findPhi, nameIdentifier, type PhiIdentifier } from '../../src/record-scoring/phi.js';

const record = (fields: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  record_id: 'rec-2024-0001',
  source: 'registry-a',
  vintage: '2024-05-01',
  fields,
  ...extra,
});

const BY_NAME: [string, PhiIdentifier][] = [
  ['name', 'name'], ['patient_name', 'name'], ['firstName', 'name'], ['last-name', 'name'], ['Surname', 'name'], ['emergency_contact_name', 'name'],
  ['pt_name', 'name'], ['insured_name', 'name'], ['beneficiary_name', 'name'], ['customer_name', 'name'], ['user_name', 'name'], ['username', 'name'],
  ['employee_name', 'name'], ['employer_name', 'name'], ['member_name', 'name'], ['subscriber_name', 'name'], ['guardian_name', 'name'],
  ['next_of_kin_name', 'name'], ['mother_maiden_name', 'name'], ['motherMaidenName', 'name'], ['full_name', 'name'], ['given_name', 'name'],
  ['family_name', 'name'], ['maiden_name', 'name'], ['cardholder_name', 'name'], ['spouse_name', 'name'], ['name_first', 'name'], ['patientFullName', 'name'],
  ['ssn', 'ssn'], ['SSN', 'ssn'], ['social_security_number', 'ssn'],
  ['mrn', 'mrn'], ['MRN', 'mrn'], ['medical_record_number', 'mrn'], ['patientId', 'mrn'],
  ['phone', 'phone'], ['phoneNumber', 'phone'], ['home_phone', 'phone'], ['mobile', 'phone'], ['telephone', 'phone'],
  ['fax', 'fax'], ['fax_number', 'fax'],
  ['email', 'email'], ['e-mail', 'email'], ['emailAddress', 'email'],
  ['address', 'address'], ['street_address', 'address'], ['address1', 'address'], ['zip_code', 'address'], ['ZIPCode', 'address'], ['postal_code', 'address'],
  ['dob', 'birth_date'], ['DOB', 'birth_date'], ['date_of_birth', 'birth_date'], ['birthDate', 'birth_date'], ['birth_date', 'birth_date'],
  ['date_of_death', 'personal_date'], ['admission_date', 'personal_date'], ['dischargeDate', 'personal_date'],
  ['health_plan_id', 'health_plan'], ['member_id', 'health_plan'], ['insurance_number', 'health_plan'], ['policy_number', 'health_plan'],
  ['account_number', 'account'], ['credit_card', 'account'], ['iban', 'account'],
  ['drivers_license', 'license'],
];

const BY_VALUE: [string, PhiIdentifier][] = [
  ['123-45-6789', 'ssn'],
  ['SSN on file: 078-05-1120.', 'ssn'],
  ['jane.doe@example.org', 'email'],
  ['contact j_smith+x@mail.example.co.uk please', 'email'],
  ['(555) 123-4567', 'phone'],
  ['555-123-4567', 'phone'],
  ['555.123.4567', 'phone'],
  ['+1 555 123 4567', 'phone'],
  ['+44 20 7946 0958', 'phone'],
  ['MRN: 0012345', 'mrn'],
  ['MRN12345', 'mrn'],
  ['mr# 88812', 'mrn'],
  ['Medical record number 4471', 'mrn'],
  ['123 Main St', 'address'],
  ['lives at 42 Elm Street, Springfield', 'address'],
  ['221B Baker Street', 'address'],
  ['1600 PENNSYLVANIA AVENUE', 'address'],
  ['PO Box 1234', 'address'],
  ['DOB: 03/14/1962', 'birth_date'],
  ['DOB 1962-03-14', 'birth_date'],
  ['pt dob 3/14/62, seen today', 'birth_date'],
  ['D.O.B. 14.03.1962', 'birth_date'],
  ['date of birth 14 March 1962', 'birth_date'],
  ['Date of Birth: March 14, 1962', 'birth_date'],
  ['birthdate=1962-03-14', 'birth_date'],
  ['born 03/14/1962', 'birth_date'],
  ['born on Mar 14th, 1962 in Ohio', 'birth_date'],
  ['SSN 123 45 6789', 'ssn'],
  ['ssn: 123456789', 'ssn'],
  ['social security number 123456789', 'ssn'],
  ['Social Security #: 123-45 6789', 'ssn'],
  ['SS# 123456789', 'ssn'],
];

/** Values that must pass: unlabelled ids and dates, a year of birth (Safe Harbor keeps years). */
const NOT_PHI = [
  '123456789',
  'order 123456789',
  'lot 123 45 6789',
  'seen 03/14/1962',
  'collected 14 March 2024',
  'born in 1962',
  'newborn screen 2024-05-01',
  'ssn pending',
  'DOB unknown',
  'SSN123456789012',
];

describe('findPhi', () => {
  it.each(BY_NAME)('refuses a field named %s as %s', (key, identifier) => {
    expect(nameIdentifier(key)).toBe(identifier);
    expect(findPhi(record({ [key]: 'x1', hba1c: 6.1 }))).toEqual([{ path: `fields.${key}`, identifier, by: 'name' }]);
  });

  it.each(BY_VALUE)('refuses the value %j as %s', (value, identifier) => {
    expect(findPhi(record({ note: value }))).toContainEqual({ path: 'fields.note', identifier, by: 'value' });
  });

  it.each(NOT_PHI)('passes the value %j', (value) => {
    expect(findPhi(record({ note: value }))).toEqual([]);
  });

  it('reads a bare name as a person, except inside an object named for a thing', () => {
    const found = findPhi(
      record({
        medication: { name: 'metformin', dose_mg: 500 },
        medications: [{ name: 'insulin glargine' }],
        lab_results: [{ name: 'HbA1c', value: 6.1 }],
        diagnoses: [{ name: 'type 2 diabetes', code: 'E11.9' }],
        allergies: [{ name: 'penicillin' }],
        facility: { name: 'North Clinic' },
        test_name: 'HbA1c',
        drug_name: 'metformin',
        lab_name: 'Central Lab',
        facility_name: 'North Clinic',
        patient_drug_name: 'metformin',
        provider_name: 'Dr House',
        file_name: 'labs.csv',
        patient: { name: 'Jane Roe', id_hash: 'ab12' },
        contacts: [{ name: 'John Roe', relation: 'brother' }],
        visit: { name: 'Jane Roe' },
        next_of_kin: 'John Roe',
        guardian: { relationship: 'mother' },
      }),
    );
    expect(found).toEqual([
      { path: 'fields.patient.name', identifier: 'name', by: 'name' },
      { path: 'fields.contacts.0.name', identifier: 'name', by: 'name' },
      { path: 'fields.visit.name', identifier: 'name', by: 'name' },
      { path: 'fields.next_of_kin', identifier: 'name', by: 'name' },
    ]);
    expect(nameIdentifier('name', 'medication')).toBeUndefined();
    expect(nameIdentifier('name', 'labResults')).toBeUndefined();
    expect(nameIdentifier('name', 'emergency_contact')).toBe('name');
    expect(nameIdentifier('street_name')).toBe('address');
  });

  it('refuses person-name fields whatever text they hold, and passes thing names whatever they hold', () => {
    const text = fc.string({ minLength: 1, maxLength: 20 }).filter((t) => t.trim() !== '');
    const personKey = fc.constantFrom('name', 'pt_name', 'insured_name', 'member_name', 'fullName', 'guardian_name', 'next_of_kin');
    const thingKey = fc.constantFrom('test_name', 'drug_name', 'lab_name', 'facility_name', 'brand_name', 'panel_name');
    // Letters only: a digit could make a value rule (MRN 12) fire, which is not what this checks.
    const word = fc.stringMatching(/^[A-Za-z][a-z]{0,11}(?: [A-Za-z]{1,8}){0,2}$/);
    fc.assert(
      fc.property(personKey, text, (key, value) => {
        expect(findPhi(record({ [key]: value }))).toContainEqual({ path: `fields.${key}`, identifier: 'name', by: 'name' });
      }),
    );
    fc.assert(
      fc.property(thingKey, word, fc.constantFrom('medication', 'labs', 'procedures', 'diagnosis', 'codes'), (key, value, parent) => {
        expect(findPhi(record({ [key]: value, [parent]: [{ name: value }] }))).toEqual([]);
      }),
    );
  });

  it('names the offending path anywhere in the record, nested fields and keys included', () => {
    const found = findPhi(
      record(
        { contacts: [{ kind: 'home', phone: '555-123-4567' }], visit: { notes: ['seen', 'call 555-987-6543'] }, 'jane@example.org': 1 },
        { source: 'jane@example.org', checks: [{ name: 'MRN: 12345', passed: true }] },
      ),
    );
    expect(found).toEqual([
      { path: 'source', identifier: 'email', by: 'value' },
      { path: 'fields.contacts.0.phone', identifier: 'phone', by: 'name' },
      { path: 'fields.visit.notes.1', identifier: 'phone', by: 'value' },
      { path: 'fields.jane@example.org', identifier: 'email', by: 'value' },
      { path: 'checks.0.name', identifier: 'mrn', by: 'value' },
    ]);
    expect(describePhi(found)).toBe('source (email), fields.contacts.0.phone (phone), fields.visit.notes.1 (phone), fields.jane@example.org (email), checks.0.name (mrn)');
  });

  it('judges names only inside fields, and only when the field carries a value', () => {
    expect(findPhi(record({ has_phone: true, email: '', address: null, phone_verified: false, zip: {} }))).toEqual([]);
    expect(findPhi({ ...record({}), checks: [{ name: 'range', passed: true }], sources: [{ name: 'ehr', agrees: true }] })).toEqual([]);
    expect(findPhi(record({ address: { city: 'Springfield' } }))).toEqual([{ path: 'fields.address', identifier: 'address', by: 'name' }]);
  });

  it('passes a clean clinical record: ids, sources, ISO dates and times, hashes, clinical terms', () => {
    const clean = record(
      {
        hba1c: 6.1,
        test_name: 'HbA1c',
        drug_name: 'metformin',
        file_name: 'labs.csv',
        cell_count: 1200,
        vaccine: 'mRNA-1273',
        imaging: '2024 Chest CT',
        ecg: 'V2 ST elevation 2 mm',
        bp: '120/80',
        measured_at: '2024-05-01T10:15:30.123Z',
        collected_on: '2024-05-01',
        zip3: '021',
        has_phone: true,
        dose_mg: '500',
        icd10: 'E11.9',
        loinc: '4548-4',
        uuid: '123e4567-e89b-12d3-a456-426614174000',
        visit_year: 2024,
        ratio: '1:2.5',
        version: '10.2.3',
      },
      {
        consent: { status: 'granted', scope: 'research', expires: '2026-01-31' },
        history: [{ at: '2024-05-01T00:00:00+02:00', hash: `sha256:${'ab12'.repeat(16)}` }],
      },
    );
    expect(findPhi(clean)).toEqual([]);
  });

  it('flags no ISO dates, date-times, UUIDs, decimals or hex digests', () => {
    const benign = fc.oneof(
      fc.date({ min: new Date('1900-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString()),
      fc.date({ min: new Date('1900-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10)),
      fc.uuid(),
      fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
      fc.stringMatching(/^[0-9a-f]{64}$/).map((h) => `sha256:${h}`),
      fc.integer().map(String),
    );
    fc.assert(
      fc.property(fc.dictionary(fc.stringMatching(/^(?:value|reading|lab|code|at)_[0-9]$/), benign), fc.array(benign, { maxLength: 3 }), (fields, list) => {
        expect(findPhi(record({ ...fields, list }, { record_id: list[0] ?? 'r' }))).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('stays linear on adversarial strings and keys (a body may hold a 1 MiB string)', () => {
    const n = 200_000;
    const shapes = ['a'.repeat(n), 'a.'.repeat(n / 2), 'a@'.repeat(n / 2), '+1 '.repeat(n / 3), '1-'.repeat(n / 2), 'MRN' + ' '.repeat(n), '1 ' + 'Ab '.repeat(n / 3), '_'.repeat(n) + 'name', 'A'.repeat(n), 'aA'.repeat(n / 2)];
    const started = performance.now();
    for (const shape of shapes) findPhi(record({ note: shape, nested: { [shape]: 'x' } }));
    // Linear: milliseconds. The quadratic e-mail pattern this replaced took over a minute here.
    expect(performance.now() - started).toBeLessThan(3000);
  });
});
