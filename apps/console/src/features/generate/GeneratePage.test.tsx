import type { AccountSummary, ModelList, SubmitGenerationRequest } from '@vidgen/client';
import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { errorAnswer, example } from '../../../test/support/fake-api';
import { renderConsole } from '../../../test/support/render';

const models = example<ModelList>('listModels').data;
const model = (id: string) => models.find((m) => m.id === id)!;

const optionValues = (label: string) => within(screen.getByLabelText(label)).getAllByRole('option').map((option) => (option as HTMLOptionElement).value);
const valueOf = (label: string) => (screen.getByLabelText(label) as HTMLSelectElement | HTMLInputElement).value;
/** The text of everything an input's aria-describedby points at. */
const descriptionOf = (element: HTMLElement) =>
  (element.getAttribute('aria-describedby') ?? '')
    .split(' ')
    .map((id) => (id ? document.getElementById(id)?.textContent ?? '' : ''))
    .join(' | ');

/** The fake API answers an operation's 200 example by default; submitGeneration answers 202. */
const accepted = () => ({ status: 202, body: example('submitGeneration', 202) });

async function openForm(handlers: Parameters<typeof renderConsole>[1] = {}) {
  const view = renderConsole('/generate', { submitGeneration: accepted, ...handlers });
  await screen.findByLabelText('Model');
  return view;
}

async function addReference(url: string) {
  await userEvent.click(screen.getByRole('button', { name: 'Add reference' }));
  const inputs = screen.getAllByLabelText(/^Reference URL \d+$/);
  const input = inputs[inputs.length - 1]!;
  // Adding focuses the new input, so the URL goes straight into it.
  expect(document.activeElement).toBe(input);
  if (url) await userEvent.paste(url);
  return input;
}

async function typePrompt(text: string) {
  await userEvent.click(screen.getByLabelText('Prompt'));
  await userEvent.paste(text);
}

beforeEach(() => {
  // The client retries a failed submit with a random backoff; no wait makes the tests quick.
  vi.spyOn(Math, 'random').mockReturnValue(0);
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe('the Generate page', () => {
  it('offers only what the chosen model allows, and resets the settings it lacks on a model change', async () => {
    await openForm();
    const first = models[0]!;
    expect(optionValues('Model')).toEqual(models.map((m) => m.id));
    expect(optionValues('Duration')).toEqual(first.durations.map(String));
    expect(optionValues('Resolution')).toEqual(first.resolutions);
    expect(optionValues('Aspect ratio')).toEqual(first.aspectRatios);
    // The service's defaults, since the model offers them.
    expect([valueOf('Duration'), valueOf('Resolution'), valueOf('Aspect ratio')]).toEqual(['5', '720p', '16:9']);

    await userEvent.selectOptions(screen.getByLabelText('Duration'), '6');
    await userEvent.selectOptions(screen.getByLabelText('Aspect ratio'), '9:16');
    await userEvent.selectOptions(screen.getByLabelText('Model'), 'vidgen-1.5-pro');
    expect(optionValues('Duration')).toEqual(model('vidgen-1.5-pro').durations.map(String));
    // 6 s is not a vidgen-1.5-pro duration: back to a valid one; 9:16 is, so it stays.
    expect(valueOf('Duration')).toBe('5');
    expect(valueOf('Aspect ratio')).toBe('9:16');
  });

  it('prices the task live from the model’s rate, and warns when it costs more than the balance', async () => {
    await openForm({ getAccount: () => ({ body: { ...example<AccountSummary>('getAccount'), balance: 100 } }) });
    const rates = Object.fromEntries(model('vidgen-2.0').prices.map((p) => [p.resolution, p.creditsPerSecond]));
    expect(await screen.findByText(`Price: ${rates['720p']! * 5} credits`)).toBeTruthy();
    expect(screen.getByText('Balance: 100 credits')).toBeTruthy();
    expect(screen.queryByText(/costs more than your balance/)).toBeNull();

    await userEvent.selectOptions(screen.getByLabelText('Duration'), '10');
    expect(screen.getByText(`Price: ${rates['720p']! * 10} credits`)).toBeTruthy();
    await userEvent.selectOptions(screen.getByLabelText('Resolution'), '1080p');
    expect(screen.getByText(`Price: ${rates['1080p']! * 10} credits`)).toBeTruthy();
    expect(screen.getByText(/costs more than your balance/)).toBeTruthy();
  });

  it('shows the kind of each reference and the mode they make, and flags what the model refuses', async () => {
    await openForm();
    expect(screen.getByText('text_to_video')).toBeTruthy();

    const first = await addReference('https://cdn.example.com/refs/bud.PNG?v=2');
    expect(descriptionOf(first)).toContain('image');
    expect(screen.getByText('first_frame')).toBeTruthy();

    await addReference('https://cdn.example.com/refs/bloom.jpg');
    expect(screen.getByText('first_last_frame')).toBeTruthy();

    const third = await addReference('https://cdn.example.com/refs/camera-move.mp4');
    expect(descriptionOf(third)).toContain('video');
    expect(screen.getByText('multimodal_reference')).toBeTruthy();

    const fourth = await addReference('https://cdn.example.com/refs/notes.txt');
    expect(descriptionOf(fourth)).toContain('unknown extension');

    // vidgen-1.5-pro: images only, at most 2, no multimodal mode.
    await userEvent.selectOptions(screen.getByLabelText('Model'), 'vidgen-1.5-pro');
    expect(descriptionOf(third)).toContain('vidgen-1.5-pro does not accept video');
    expect(screen.getByText(/vidgen-1.5-pro does not offer the Multimodal reference mode/)).toBeTruthy();
    expect(screen.getByText(/vidgen-1.5-pro takes at most 2 references: remove 2/)).toBeTruthy();
    expect(screen.queryByRole('button', { name: 'Add reference' })).toBeNull();

    await userEvent.click(screen.getByRole('button', { name: 'Remove reference 4' }));
    await userEvent.click(screen.getByRole('button', { name: 'Remove reference 3' }));
    expect(screen.getByText('first_last_frame')).toBeTruthy();
    expect(screen.queryByText(/does not offer/)).toBeNull();
  });

  it('says audio needs an image or a video beside it', async () => {
    await openForm();
    await addReference('https://cdn.example.com/refs/beat.mp3');
    expect(screen.getByText('Audio needs an image or a video beside it.')).toBeTruthy();
    await addReference('https://cdn.example.com/refs/dancer.webp');
    expect(screen.queryByText('Audio needs an image or a video beside it.')).toBeNull();
  });

  it('sends the form with an Idempotency-Key, then opens the new task and refreshes the balance', async () => {
    const { api } = await openForm();
    await userEvent.selectOptions(screen.getByLabelText('Model'), 'vidgen-1.5-pro');
    await userEvent.selectOptions(screen.getByLabelText('Duration'), '10');
    await typePrompt('The flower bud slowly opens into full bloom');
    await addReference('https://cdn.example.com/refs/bud.png');
    await addReference('');
    const accountReads = api.calls('getAccount').length;
    await userEvent.click(screen.getByRole('button', { name: 'Generate' }));

    await waitFor(() => expect(api.calls('submitGeneration')).toHaveLength(1));
    const sent = api.calls('submitGeneration')[0]!;
    expect(sent.body).toEqual({
      model: 'vidgen-1.5-pro',
      prompt: 'The flower bud slowly opens into full bloom',
      duration: 10,
      resolution: '720p',
      aspectRatio: '16:9',
      // The empty second row is not sent.
      mediaUrls: ['https://cdn.example.com/refs/bud.png'],
    } satisfies SubmitGenerationRequest);
    expect(sent.headers.get('Idempotency-Key')).toMatch(/^[0-9a-f-]{32,36}$/);

    // The task page (/tasks/:requestId) replaces the form.
    await waitFor(() => expect(screen.queryByLabelText('Prompt')).toBeNull());
    expect(screen.queryByText(/Page not found/)).toBeNull();
    await waitFor(() => expect(api.calls('getAccount').length).toBeGreaterThan(accountReads));
  });

  it('reuses the Idempotency-Key when the same form is sent again after a failure, and makes a new one once it changes', async () => {
    let failure: 'network' | 500 | undefined = 'network';
    const { api } = await openForm({
      submitGeneration: () => {
        if (failure === 'network') throw new TypeError('Failed to fetch');
        if (failure === 500) return errorAnswer(500, 'internal_error', 'an unexpected error occurred');
        return accepted();
      },
    });
    const keys = () => api.calls('submitGeneration').map((call) => call.headers.get('Idempotency-Key'));
    await typePrompt('A paper boat drifting down a rainy city street');

    await userEvent.click(screen.getByRole('button', { name: 'Generate' }));
    expect((await screen.findByRole('alert')).textContent).toMatch(/could not be reached/);
    const firstKey = keys()[0];
    expect(firstKey).toBeTruthy();
    // The client's own retries carried the same key.
    expect(new Set(keys())).toEqual(new Set([firstKey]));

    failure = 500;
    const before = keys().length;
    await userEvent.click(screen.getByRole('button', { name: 'Generate' }));
    await waitFor(() => expect(screen.getByRole('alert').textContent).toMatch(/unexpected error/));
    expect(keys().length).toBeGreaterThan(before);
    expect(new Set(keys())).toEqual(new Set([firstKey]));

    failure = undefined;
    await typePrompt(' at dusk');
    const beforeEdit = keys().length;
    await userEvent.click(screen.getByRole('button', { name: 'Generate' }));
    await waitFor(() => expect(keys().length).toBe(beforeEdit + 1));
    expect(keys()[beforeEdit]).not.toBe(firstKey);
    expect(api.calls('submitGeneration')[beforeEdit]!.body).toMatchObject({ prompt: 'A paper boat drifting down a rainy city street at dusk' });
    await waitFor(() => expect(screen.queryByLabelText('Prompt')).toBeNull());
  });

  it('shows each error detail at its field, and the rest in a summary that takes focus', async () => {
    await openForm({
      submitGeneration: () =>
        errorAnswer(400, 'invalid_request', 'the request breaks the model’s rules', [
          { field: '/duration', message: 'must be one of 5, 10' },
          { field: '/mediaUrls/1', message: 'is a video (.mp4); vidgen-1.5-pro accepts images only' },
          { field: '', message: 'something about the whole body' },
        ]),
    });
    await typePrompt('The lighthouse beam sweeps across the bay');
    await addReference('https://cdn.example.com/refs/lighthouse.jpg');
    await addReference('');
    await addReference('https://cdn.example.com/refs/storm.mp4');
    await userEvent.click(screen.getByRole('button', { name: 'Generate' }));

    const summary = await screen.findByRole('alert');
    expect(summary.textContent).toContain('the request breaks the model’s rules');
    expect(summary.textContent).toContain('something about the whole body');
    await waitFor(() => expect(document.activeElement).toBe(summary));

    const duration = screen.getByLabelText('Duration');
    expect(duration.getAttribute('aria-invalid')).toBe('true');
    expect(descriptionOf(duration)).toContain('must be one of 5, 10');
    // mediaUrls[1] is the third row: the empty second row was not sent.
    const third = screen.getByLabelText('Reference URL 3');
    expect(third.getAttribute('aria-invalid')).toBe('true');
    expect(descriptionOf(third)).toContain('accepts images only');
    expect(screen.getByLabelText('Reference URL 1').getAttribute('aria-invalid')).toBeNull();
    expect(screen.getByLabelText('Prompt').getAttribute('aria-invalid')).toBeNull();
    // The summary links to each field with a message.
    await userEvent.click(within(summary).getByRole('link', { name: 'Reference URL 3' }));
    expect(document.activeElement).toBe(third);

    // Editing a field clears its message.
    await userEvent.selectOptions(duration, '10');
    expect(duration.getAttribute('aria-invalid')).toBeNull();
  });

  it('says when the balance is too low, with the credits the service gave', async () => {
    const { api } = await openForm({ submitGeneration: () => ({ status: 402, body: example('submitGeneration', 402) }) });
    await typePrompt('A paper boat');
    const accountReads = api.calls('getAccount').length;
    await userEvent.click(screen.getByRole('button', { name: 'Generate' }));
    const summary = await screen.findByRole('alert');
    expect(summary.textContent).toContain('this task costs 80 credits; the balance is 12');
    expect(summary.textContent).toContain('credits.required: credits this task costs (80)');
    expect(summary.textContent).toContain('credits.available: credits on the account (12)');
    await waitFor(() => expect(api.calls('getAccount').length).toBeGreaterThan(accountReads));
  });

  it('asks for a prompt and valid metadata before sending anything', async () => {
    const { api } = await openForm();
    await userEvent.click(screen.getByText('More options'));
    await userEvent.click(screen.getByLabelText('Metadata'));
    await userEvent.paste('[1, 2]');
    await userEvent.click(screen.getByRole('button', { name: 'Generate' }));
    expect(await screen.findByRole('alert')).toBeTruthy();
    expect(screen.getByLabelText('Prompt').getAttribute('aria-invalid')).toBe('true');
    expect(descriptionOf(screen.getByLabelText('Prompt'))).toContain('Enter a prompt');
    expect(descriptionOf(screen.getByLabelText('Metadata'))).toContain('must be a JSON object');
    expect(api.calls('submitGeneration')).toHaveLength(0);
  });

  it('says so when the models cannot be loaded', async () => {
    renderConsole('/generate', { listModels: () => errorAnswer(503, 'unavailable', 'the service is shutting down', undefined) });
    expect((await screen.findByRole('alert', {}, { timeout: 10_000 })).textContent).toMatch(/shutting down/);
  });
});
