// Entry of the dashboard's browser bundle (built by scripts/build-dashboard.mjs into
// dist/dashboard/assets/). The shell HTML the server answers for every page route loads it.

import { render } from 'preact';
import { useEffect } from 'preact/hooks';
import { Empty, Link } from './components';
import { duration } from './format';
import { JobPage } from './pages/job';
import { NodesPage } from './pages/nodes';
import { OverviewPage } from './pages/overview';
import { QueuePage } from './pages/queue';
import { SchedulesPage } from './pages/schedules';
import { SearchBox, SearchPage } from './pages/search';
import { setPaused, useRefreshState, useTick } from './poll';
import { useLocation, type Route } from './router';
import { settings } from './settings';
import './styles.css';

function RefreshControl() {
  const s = useRefreshState();
  const now = useTick();
  const age = s.updatedAt === null ? null : now - s.updatedAt;
  const late = age !== null && age > settings.refreshMs * 3;
  return (
    <div class={`refresh${s.error ? ' failing' : late && !s.paused ? ' late' : ''}`} data-testid="refresh">
      <span class="refresh-text" title={`polls every ${duration(settings.refreshMs)}`}>
        {s.error ? 'refresh failing · ' : ''}
        {age === null ? 'loading' : `updated ${age < 1000 ? 'just now' : duration(Math.floor(age / 1000) * 1000) + ' ago'}`}
        {s.paused ? ' · paused' : ''}
      </span>
      <button
        type="button"
        class="btn btn-small"
        onClick={() => setPaused(!s.paused)}
        aria-pressed={s.paused}
        data-testid="refresh-toggle"
      >
        {s.paused ? 'Resume refresh' : 'Pause refresh'}
      </button>
    </div>
  );
}

const NAV: { to: string; label: string; is: (r: Route) => boolean }[] = [
  { to: '', label: 'Overview', is: (r) => r.page === 'overview' || r.page === 'queue' || r.page === 'job' },
  { to: '/schedules', label: 'Recurring jobs', is: (r) => r.page === 'schedules' },
  { to: '/nodes', label: 'Nodes', is: (r) => r.page === 'nodes' },
];

function titleOf(r: Route): string {
  switch (r.page) {
    case 'overview':
      return 'Overview';
    case 'queue':
      return `Queue ${r.queue}`;
    case 'job':
      return `Job ${r.id}`;
    case 'schedules':
      return 'Recurring jobs';
    case 'nodes':
      return 'Nodes';
    case 'search':
      return 'Search';
    default:
      return 'Not found';
  }
}

function App() {
  const { route, query } = useLocation();
  useEffect(() => {
    document.title = `${titleOf(route)} · ${settings.title}`;
  }, [route]);
  let page;
  switch (route.page) {
    case 'overview':
      page = <OverviewPage />;
      break;
    case 'queue':
      page = <QueuePage key={route.queue} queue={route.queue} query={query} />;
      break;
    case 'job':
      page = <JobPage key={`${route.id}:${query.get('connection') ?? ''}`} id={route.id} connection={query.get('connection')} />;
      break;
    case 'schedules':
      page = <SchedulesPage />;
      break;
    case 'nodes':
      page = <NodesPage />;
      break;
    case 'search':
      page = <SearchPage q={query.get('q') ?? ''} />;
      break;
    default:
      page = <Empty>No dashboard page at {route.path}.</Empty>;
  }
  return (
    <>
      <header class="top">
        <div class="top-inner">
          <Link to="" class="brand">
            {settings.title}
          </Link>
          <nav class="main-nav">
            {NAV.map((n) => (
              <Link key={n.to} to={n.to} class={n.is(route) ? 'current' : ''}>
                {n.label}
              </Link>
            ))}
          </nav>
          <SearchBox current={route.page === 'search' ? (query.get('q') ?? '') : ''} />
          {settings.readOnly && (
            <span class="badge readonly" title="This dashboard is mounted with readOnly: true">
              read-only
            </span>
          )}
          <RefreshControl />
        </div>
      </header>
      <main class="page">{page}</main>
    </>
  );
}

render(<App />, document.getElementById('app') ?? document.body);
