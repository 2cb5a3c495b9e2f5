// The lint `npm test` runs (eslint --config test/eslint.config.mjs): typescript-eslint's
// recommended type-checked rules over src, bench and test. The top level of the repository holds
// only what the product card names, so the config lives here.
import tseslint from 'typescript-eslint';

const unusedVars = ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }];

export default tseslint.config(
  { ignores: ['**/node_modules/**', 'src/native/build/**', 'bench/results/**'] },
  {
    files: ['src/**/*.ts', 'bench/**/*.ts', 'test/**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: new URL('..', import.meta.url).pathname },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': unusedVars,
    },
  },
  {
    // Tests read HTTP answers as untyped JSON (`any`) and assert on their shape: the type is what
    // they check, so the no-unsafe-* family would only force casts that assert nothing. Their fake
    // adapters implement async interfaces with async functions that need not await.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/require-await': 'off',
    },
  },
);
