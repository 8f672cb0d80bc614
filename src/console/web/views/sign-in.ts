/** Sign-in: paste an API key; the service says whether it is valid and what it may do. */
import { Api, ApiError } from '../api.js';
import { h, notice, replace } from '../dom.js';
import { type Session, saveSession } from '../session.js';

export function signInView(onSignedIn: (s: Session) => void): HTMLElement {
  const input = h('input', {
    id: 'api-key',
    name: 'api-key',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
  });
  const message = h('div', {});
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    { class: 'card sign-in', novalidate: true },
    h('label', { for: 'api-key' }, 'API key'),
    input,
    h(
      'p',
      { class: 'hint' },
      'Kept in this tab only (sessionStorage) and sent as a Bearer token; an operator key gets the controls, a client key a read-only view.',
    ),
    submit,
    message,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const apiKey = input.value.trim();
    if (!apiKey) {
      replace(message, notice('alert', 'Enter an API key.'));
      input.focus();
      return;
    }
    submit.disabled = true;
    try {
      const api = new Api(apiKey);
      // Any authenticated read proves the key; stats then tells operator from client.
      await api.list({ limit: 1 });
      const session = { apiKey, role: await api.role() };
      saveSession(session);
      onSignedIn(session);
    } catch (err) {
      const text =
        err instanceof ApiError && err.status === 401
          ? 'This key was not accepted (401).'
          : `Sign-in failed: ${(err as Error).message}`;
      replace(message, notice('alert', text));
      input.focus();
    } finally {
      submit.disabled = false;
    }
  });
  return h('main', { id: 'main', class: 'narrow' }, h('h1', {}, 'Idem console: sign in'), form);
}
