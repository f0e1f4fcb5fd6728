/** Renders the whole console (session, query cache, router) at a path, signed in, against a fake API. */
import { render } from '@testing-library/react';
import { App } from '../../src/app/App';
import { KEY_STORAGE_ITEM } from '../../src/app/session';
import { fakeApi, type Handler } from './fake-api';
import type { operations } from '@vidgen/client';

export const TEST_KEY = 'vg_test_ComponentTestKey0000000000000000';
export const BASE_URL = 'http://console.test';

export function renderConsole(path: string, handlers: Partial<Record<keyof operations, Handler>> = {}, options: { signedIn?: boolean } = {}) {
  if (options.signedIn ?? true) sessionStorage.setItem(KEY_STORAGE_ITEM, TEST_KEY);
  const api = fakeApi(handlers);
  const view = render(<App baseUrl={BASE_URL} fetch={api.fetch} initialPath={path} />);
  return { ...view, api };
}
