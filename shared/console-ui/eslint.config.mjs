// ESLint's flat config for the console's JavaScript (browser ES modules, no
// build step); run by scripts/console-test.sh. This file is not served: the
// console's files are the ones listed in shared/src/console/assets.rs.
//
// The repository has no node_modules: eslint, @eslint/js and globals are
// installed by that script under $WEBHOOKS_TOOLS_DIR/eslint (default
// .tools/eslint), and loaded from there.

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const tools = process.env.WEBHOOKS_TOOLS_DIR || fileURLToPath(new URL('../../.tools', import.meta.url));
const require = createRequire(join(tools, 'eslint', 'node_modules', '/'));
const js = require('@eslint/js');
const globals = require('globals');

export default [
  js.configs.recommended,
  {
    files: ['**/*.js'],
    languageOptions: {
      ecmaVersion: 'latest',
      sourceType: 'module',
      globals: globals.browser,
    },
  },
  {
    files: ['eslint.config.mjs'],
    languageOptions: { globals: globals.node },
  },
];
