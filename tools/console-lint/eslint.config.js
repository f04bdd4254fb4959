// ESLint for the console's JavaScript: ES modules in the browser, no build step.
// Run from the repository root (`make lint`, `make test`):
//   tools/console-lint/node_modules/.bin/eslint -c tools/console-lint/eslint.config.js \
//     collector/console/static
import js from "@eslint/js";
import globals from "globals";

export default [
  // Third-party files served as released (collector/console/static/vendor/README.md).
  { ignores: ["**/static/vendor/**"] },
  js.configs.recommended,
  {
    files: ["**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: globals.browser,
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      "max-len": ["error", { code: 99, ignoreUrls: true }],
      eqeqeq: ["error", "smart"],
      "no-var": "error",
      "prefer-const": "error",
      "no-unused-vars": ["error", { args: "after-used", caughtErrors: "none" }],
    },
  },
];
