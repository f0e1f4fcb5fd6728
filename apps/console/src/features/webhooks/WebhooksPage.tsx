import { Page } from '../../ui/Page';

export default function WebhooksPage() {
  return (
    <Page title="Webhooks">
      <p>To be built.</p>
    </Page>
  );
}
