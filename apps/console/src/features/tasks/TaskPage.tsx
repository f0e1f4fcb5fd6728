import { Page } from '../../ui/Page';

export default function TaskPage() {
  return (
    <Page title="Task">
      <p>To be built.</p>
    </Page>
  );
}
