import { Page } from '../../ui/Page';

export default function GeneratePage() {
  return (
    <Page title="Generate">
      <p>To be built.</p>
    </Page>
  );
}
