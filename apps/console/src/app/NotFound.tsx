import { Link } from 'react-router';
import { Page } from '../ui/Page';

export function NotFound() {
  return (
    <Page title="Page not found">
      <p>
        There is no such page in the console. <Link to="/">Go to the overview</Link>.
      </p>
    </Page>
  );
}
