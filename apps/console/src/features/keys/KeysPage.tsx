import { Page } from '../../ui/Page';

export default function KeysPage() {
  return (
    <Page title="Keys">
      <p>To be built.</p>
    </Page>
  );
}
