import { Page } from '../../ui/Page';
import { Deliveries } from './Deliveries';
import { SigningSecret } from './SigningSecret';
import './webhooks.css';

/** The webhook signing secret (show, copy, rotate) and the deliveries made to the tasks' webhook URLs. */
export default function WebhooksPage() {
  return (
    <Page title="Webhooks">
      <SigningSecret />
      <Deliveries />
    </Page>
  );
}
