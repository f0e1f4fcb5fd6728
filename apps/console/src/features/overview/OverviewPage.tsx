import { Page } from '../../ui/Page';

export default function OverviewPage() {
  return (
    <Page title="Overview">
      <p>To be built.</p>
    </Page>
  );
}
