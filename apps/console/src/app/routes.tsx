/**
 * The console's pages. Each is its own chunk, loaded when first visited, so the first page
 * loads only what it shows (the budget: 150 KB of JavaScript, gzipped).
 */
import type { Scope } from '@vidgen/client';
import { lazy, Suspense, type ComponentType, type LazyExoticComponent } from 'react';
import type { RouteObject } from 'react-router';
import { Loading } from '../ui/states';
import { Layout } from './Layout';
import { NotFound } from './NotFound';
import { RequireScope } from './RequireScope';

function page(scope: Scope, Component: LazyExoticComponent<ComponentType>) {
  return (
    <RequireScope scope={scope}>
      <Suspense fallback={<Loading />}>
        <Component />
      </Suspense>
    </RequireScope>
  );
}

const OverviewPage = lazy(() => import('../features/overview/OverviewPage'));
const GeneratePage = lazy(() => import('../features/generate/GeneratePage'));
const TasksPage = lazy(() => import('../features/tasks/TasksPage'));
const TaskPage = lazy(() => import('../features/tasks/TaskPage'));
const KeysPage = lazy(() => import('../features/keys/KeysPage'));
const WebhooksPage = lazy(() => import('../features/webhooks/WebhooksPage'));

export const routes: RouteObject[] = [
  {
    element: <Layout />,
    children: [
      { index: true, element: page('tasks:read', OverviewPage) },
      { path: 'generate', element: page('tasks:write', GeneratePage) },
      { path: 'tasks', element: page('tasks:read', TasksPage) },
      { path: 'tasks/:requestId', element: page('tasks:read', TaskPage) },
      { path: 'keys', element: page('keys:manage', KeysPage) },
      { path: 'webhooks', element: page('webhooks:manage', WebhooksPage) },
      { path: '*', element: <NotFound /> },
    ],
  },
];
