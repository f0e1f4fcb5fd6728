/** Request bodies taken from the spec's own named examples, so the suite and the docs agree. */
import { at, operationById, pointer, type JsonObject } from './spec.js';

export type SubmitBody = JsonObject & { model: string; prompt: string };

function requestExample(name: string): SubmitBody {
  const submit = operationById('submitGeneration');
  const ref = at(`${submit.pointer}${pointer('requestBody', 'content', 'application/json', 'examples', name)}`) as JsonObject;
  const example = at(String(ref.$ref).slice(1)) as JsonObject;
  return structuredClone(example.value) as SubmitBody;
}

export const submitExamples = {
  textToVideo: requestExample('textToVideo'),
  firstFrame: requestExample('firstFrame'),
  firstLastFrame: requestExample('firstLastFrame'),
  multimodalReference: requestExample('multimodalReference'),
};

/** A cheap valid submission (no webhook: the suite must not call out). */
export const minimalSubmit = (): SubmitBody => ({ model: 'vidgen-2.0-fast', prompt: 'contract suite: a red ball bouncing', duration: 4, resolution: '480p' });

export const UNKNOWN_TASK_ID = 'gen_00000000000000000000000000';
export const MOCK_TASK_ID = 'gen_01JD6Z8K4T9QW3M5R7X2B6C8N0';

/** Ids of the right shape that name nothing, and the ids the spec's examples (so the mock) use. */
export const UNKNOWN_KEY_ID = 'key_00000000000000000000000000';
export const UNKNOWN_DELIVERY_ID = 'msg_00000000000000000000000000';
export const MOCK_KEY_ID = 'key_01JD7A4C6E8G0J2K4M6P8R0T2V';
export const MOCK_DELIVERY_ID = 'msg_01JD6ZG7K9M1N3P5Q7R9S1T3V5';
