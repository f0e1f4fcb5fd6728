import { useModels } from '../../app/queries';
import { Page } from '../../ui/Page';
import { Empty, ErrorNotice, Loading } from '../../ui/states';
import { GenerateForm } from './GenerateForm';
import './generate.css';

/** Submit a task: the form offers only what the models answer allows, and prices it before it is sent. */
export default function GeneratePage() {
  const models = useModels();
  return (
    <Page title="Generate">
      {models.error ? (
        <ErrorNotice error={models.error} retry={() => void models.refetch()} />
      ) : !models.data ? (
        <Loading label="Loading the models…" />
      ) : models.data.data.length === 0 ? (
        <Empty>No models are available on this service.</Empty>
      ) : (
        <GenerateForm models={models.data.data} />
      )}
    </Page>
  );
}
