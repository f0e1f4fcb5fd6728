/** Opens the store the configuration names. */
import type { Config } from '../config.js';
import { SqliteStore } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

export function openStore(config: Pick<Config, 'database'>): Store {
  switch (config.database.kind) {
    case 'sqlite':
      return new SqliteStore(config.database.path);
  }
}
