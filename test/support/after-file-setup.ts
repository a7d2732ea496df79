import { runAfterFileHooks } from './after-file';

// Declared in the root block by a jest setup file, this afterAll runs after every afterAll of the
// test file's describe blocks: the teardown registered with afterFile() (a test database's drop)
// comes after the file has closed its apps.
afterAll(runAfterFileHooks);
