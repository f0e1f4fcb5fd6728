import { Page } from '../../ui/Page';

export default function TasksPage() {
  return (
    <Page title="Tasks">
      <p>To be built.</p>
    </Page>
  );
}
